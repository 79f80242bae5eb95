// The 3.11 location table reader (issue #32) against CPython's own reading
// of the same tables: python3.11 compiles code of many shapes and prints
// each code object's co_linetable and what co_lines() says of every
// instruction; python_line must agree for every one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "support/process.h"
#include "symbolize/python_code.h"

namespace offcpu {
namespace {

std::string unhex(const std::string &h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

TEST(PythonLine, AgreesWithCPython) {
  const char *python = "/usr/bin/python3.11";
  if (access(python, X_OK) != 0)
    GTEST_SKIP() << "no " << python;
  // Every code object of a few standard modules (long functions, far
  // jumps, lines that go backwards): "C first_line table_hex" then
  // "I index line" per instruction with a line.
  const char *script = R"(
import dis, types, threading, queue, json.decoder, argparse
def codes(c):
    yield c
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            yield from codes(k)
for m in (threading, queue, json.decoder, argparse):
    src = open(m.__file__).read()
    for c in codes(compile(src, m.__file__, "exec")):
        print("C", c.co_firstlineno, c.co_linetable.hex())
        for start, end, line in c.co_lines():
            for off in range(start, end, 2):
                if line is not None:
                    print("I", off // 2, line)
)";
  auto r = test::run({python, "-c", script}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string kind, table;
  uint32_t first = 0;
  size_t checked = 0, wrong = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    f >> kind;
    if (kind == "C") {
      std::string hex;
      f >> first >> hex;
      table = unhex(hex);
      continue;
    }
    uint32_t index = 0, want = 0;
    f >> index >> want;
    checked++;
    uint32_t got = python_line(table, first, index);
    if (got != want && ++wrong < 5)
      ADD_FAILURE() << "instruction " << index << ": line " << got
                    << ", CPython says " << want;
  }
  EXPECT_GT(checked, 10000u);
  EXPECT_EQ(wrong, 0u);
}

TEST(PythonLine, MalformedTablesGiveNoLine) {
  EXPECT_EQ(python_line("", 10, 0), 0u);
  EXPECT_EQ(python_line(std::string(1, '\x01'), 10, 0), 0u); // no entry mark
  EXPECT_EQ(python_line(std::string(1, '\xf0'), 10, 0), 0u); // cut varint
}

TEST(PythonFrames, TaggedWordsFollowTheNativeFrames) {
  std::vector<uint64_t> ips = {0x401000,
                               0x402000,
                               OFFCPU_PY_CODE_TAG | 0x7f0000001000,
                               OFFCPU_PY_INSTR_TAG | 5,
                               OFFCPU_PY_CODE_TAG | 0x7f0000002000,
                               OFFCPU_PY_INSTR_TAG | OFFCPU_PY_INSTR_ENTRY | 9};
  size_t native = 0;
  auto py = python_frames_of(ips, &native);
  EXPECT_EQ(native, 2u);
  ASSERT_EQ(py.size(), 2u);
  EXPECT_EQ(py[0].code, 0x7f0000001000u);
  EXPECT_EQ(py[0].index, 5u);
  EXPECT_FALSE(py[0].entry);
  EXPECT_TRUE(py[1].entry);
  EXPECT_EQ(py[1].index, 9u);
}

} // namespace
} // namespace offcpu
