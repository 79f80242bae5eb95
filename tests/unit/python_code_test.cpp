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

// Every code object of a few standard modules (long functions, far jumps,
// lines that go backwards): "C first_line table_hex" then "I index line"
// per instruction with a line, as the interpreter itself reads its table.
const char *kLinesScript = R"(
import types, threading, queue, json.decoder, argparse
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

// python_line (3.11+) or python_line_pairs (3.10) against the interpreter.
void expect_lines_agree(const std::string &python, PythonLines kind) {
  if (access(python.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no " << python;
  auto r = test::run({python, "-c", kLinesScript}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string kind_word, table;
  uint32_t first = 0;
  size_t checked = 0, wrong = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    f >> kind_word;
    if (kind_word == "C") {
      std::string hex;
      f >> first >> hex;
      table = unhex(hex);
      continue;
    }
    uint32_t index = 0, want = 0;
    f >> index >> want;
    checked++;
    uint32_t got = kind == PythonLines::Pairs
                       ? python_line_pairs(table, first, index)
                       : python_line(table, first, index);
    if (got != want && ++wrong < 5)
      ADD_FAILURE() << python << " instruction " << index << ": line " << got
                    << ", CPython says " << want;
  }
  EXPECT_GT(checked, 10000u);
  EXPECT_EQ(wrong, 0u);
}

TEST(PythonLine, AgreesWithCPython) {
  expect_lines_agree("/usr/bin/python3.11", PythonLines::Locations);
}

// pyenv's builds on this machine (CI's too): 3.10's table has its own form.
const std::string kPyenv = "/root/.pyenv/versions/";

TEST(PythonLine, AgreesWithCPython310) {
  expect_lines_agree(kPyenv + "3.10.13/bin/python3.10", PythonLines::Pairs);
}

TEST(PythonLine, AgreesWithCPython312) {
  expect_lines_agree(kPyenv + "3.12.1/bin/python3.12", PythonLines::Locations);
}

TEST(PythonLine, AgreesWithCPython313) {
  expect_lines_agree(kPyenv + "3.13.0/bin/python3.13", PythonLines::Locations);
}

TEST(PythonLine, MalformedTablesGiveNoLine) {
  EXPECT_EQ(python_line("", 10, 0), 0u);
  EXPECT_EQ(python_line(std::string(1, '\x01'), 10, 0), 0u); // no entry mark
  EXPECT_EQ(python_line(std::string(1, '\xf0'), 10, 0), 0u); // cut varint
  EXPECT_EQ(python_line_pairs("", 10, 0), 0u);
  EXPECT_EQ(python_line_pairs(std::string(1, '\x02'), 10, 0), 0u); // cut pair
  // "No line" (-128) on the range that holds the instruction.
  EXPECT_EQ(python_line_pairs(std::string("\x04\x80", 2), 10, 1), 0u);
  EXPECT_EQ(python_line_pairs(std::string("\x04\x02", 2), 10, 1), 12u);
}

uint64_t instr_word(uint32_t index, uint8_t mark) {
  return OFFCPU_PY_INSTR_TAG | index |
         (uint64_t{mark} << OFFCPU_PY_INSTR_MARK_SHIFT);
}

TEST(PythonFrames, TaggedWordsFollowTheNativeFrames) {
  std::vector<uint64_t> ips = {0x401000,
                               0x402000,
                               OFFCPU_PY_CODE_TAG | 0x7f0000001000,
                               instr_word(5, 0),
                               OFFCPU_PY_CODE_TAG | 0x7f0000002000,
                               instr_word(9, 1)};
  size_t native = 0;
  auto py = python_chain(python_frames_of(ips, &native), PythonEntries::Flag);
  EXPECT_EQ(native, 2u);
  ASSERT_EQ(py.size(), 2u);
  EXPECT_EQ(py[0].code, 0x7f0000001000u);
  EXPECT_EQ(py[0].index, 5u);
  EXPECT_FALSE(py[0].entry);
  EXPECT_TRUE(py[1].entry);
  EXPECT_EQ(py[1].index, 9u);
}

// 3.12+: shim frames (owner 3) are dropped, and the frame each one called
// is where a C-level evaluation began; other owners (a generator's: 1)
// are ordinary frames. 3.10: every frame is its own evaluation.
TEST(PythonFrames, ChainsPerVersion) {
  std::vector<uint64_t> ips = {0x401000};
  for (auto [code, mark] : std::vector<std::pair<uint64_t, uint8_t>>{
           {0x1000, 0}, {0x2000, 1}, {0x3000, 3}, {0x4000, 0}, {0x5000, 3}}) {
    ips.push_back(OFFCPU_PY_CODE_TAG | code);
    ips.push_back(instr_word(7, mark));
  }
  size_t native = 0;
  auto raw = python_frames_of(ips, &native);
  auto shim = python_chain(raw, PythonEntries::Shim);
  ASSERT_EQ(shim.size(), 3u);
  EXPECT_EQ(shim[0].code, 0x1000u);
  EXPECT_FALSE(shim[0].entry);
  EXPECT_EQ(shim[1].code, 0x2000u);
  EXPECT_TRUE(shim[1].entry);
  EXPECT_EQ(shim[2].code, 0x4000u);
  EXPECT_TRUE(shim[2].entry);
  auto each = python_chain(raw, PythonEntries::Each);
  ASSERT_EQ(each.size(), 5u);
  for (const auto &w : each)
    EXPECT_TRUE(w.entry);
}

} // namespace
} // namespace offcpu
