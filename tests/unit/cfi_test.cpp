// The CFI parser and the table layout checked against binutils: every row
// `readelf --debug-dump=frames-interp` prints for real Debian libraries must
// come out of the table (as the BPF walker looks it up) with the same CFA,
// return address and rbp rules.
#include <gtest/gtest.h>

#include <cstdio>
#include <fcntl.h>
#include <memory>
#include <sstream>
#include <unistd.h>

#include "unwind/cfi.h"
#include "unwind/elf_cfi.h"
#include "unwind/table.h"
#include "util/fd.h"

namespace offcpu::unwind {
namespace {

struct Expected {
  uint64_t pc;
  std::string cfa, bp, ra; // readelf's columns; bp "" when not listed
};

std::string run(const std::string &cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE *)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p)
    return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p.get())) > 0)
    out.append(buf, n);
  return out;
}

// Rows of `readelf -wF`, section `section` (eh_frame or debug_frame).
std::vector<Expected> readelf_rows(const std::string &path,
                                   const std::string &flag) {
  std::istringstream in(run("readelf " + flag + " " + path + " 2>/dev/null"));
  std::vector<Expected> out;
  std::vector<std::string> columns;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> w;
    for (std::string x; f >> x;)
      w.push_back(x);
    if (w.empty())
      continue;
    if (w[0] == "LOC") {
      columns = w;
      continue;
    }
    if (line.find("FDE") != std::string::npos ||
        line.find("CIE") != std::string::npos) {
      columns.clear();
      continue;
    }
    if (columns.empty() || w.size() != columns.size() || w[0].size() != 16)
      continue;
    Expected e{std::stoull(w[0], nullptr, 16), w[1], "", ""};
    for (size_t i = 2; i < w.size(); i++) {
      if (columns[i] == "rbp")
        e.bp = w[i];
      if (columns[i] == "ra")
        e.ra = w[i];
    }
    out.push_back(e);
  }
  return out;
}

std::string describe(const Rule &r) {
  std::ostringstream s;
  s << "kind " << int(r.kind) << " flags " << int(r.flags) << " cfa_off "
    << r.cfa_off << " bp_off " << r.bp_off;
  return s.str();
}

// Checks one readelf row against the rule the table gives.
void check(const Expected &e, const Rule &r, const std::string &file) {
  SCOPED_TRACE(file + " at 0x" +
               [&] {
                 std::ostringstream s;
                 s << std::hex << e.pc;
                 return s.str();
               }() +
               ": " + e.cfa + " bp " + e.bp + " ra " + e.ra + " -> " +
               describe(r));
  if (e.ra == "u") {
    EXPECT_EQ(r.kind, UW_RULE_END);
    return;
  }
  if (e.cfa == "exp") {
    EXPECT_TRUE(r.kind == UW_RULE_PLT || r.kind == UW_RULE_CFA_DEREF ||
                r.kind == UW_RULE_SIGNAL || r.kind == UW_RULE_UNSUPPORTED);
    return;
  }
  if (e.ra != "c-8") {
    EXPECT_EQ(r.kind, UW_RULE_UNSUPPORTED);
    return;
  }
  bool sp = e.cfa.rfind("rsp+", 0) == 0, bp = e.cfa.rfind("rbp+", 0) == 0;
  if (!sp && !bp) {
    EXPECT_EQ(r.kind, UW_RULE_UNSUPPORTED);
    return;
  }
  ASSERT_EQ(r.kind, UW_RULE_CFA);
  EXPECT_EQ(r.cfa_off, std::stol(e.cfa.substr(4)));
  EXPECT_EQ((r.flags & UW_CFA_FROM_BP) != 0, bp);
  if (e.bp == "u") {
    // readelf prints u for registers the FDE has not mentioned yet, which
    // the x86-64 ABI keeps (same value), and for DW_CFA_undefined alike.
    EXPECT_EQ(r.flags & UW_BP_SAVED, 0);
  } else if (e.bp.empty() || e.bp == "s") {
    EXPECT_EQ(r.flags & (UW_BP_SAVED | UW_BP_UNDEFINED), 0);
  } else if (e.bp.rfind("c", 0) == 0) {
    EXPECT_TRUE(r.flags & UW_BP_SAVED);
    EXPECT_EQ(r.bp_off, std::stol(e.bp.substr(1)));
  } else {
    EXPECT_TRUE(r.flags & UW_BP_UNDEFINED);
  }
}

void compare_with_readelf(const std::string &path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd)
    GTEST_SKIP() << path << " not installed";
  auto cfi = read_elf_cfi(fd.get(), CfiWant::EhFrame);
  ASSERT_TRUE(cfi);
  ASSERT_FALSE(cfi->eh_frame.empty()) << path;
  CfiStats st;
  auto rows = parse_cfi({cfi->eh_frame, cfi->eh_frame_vaddr, true}, &st);
  EXPECT_EQ(st.bad_entries, 0u);
  RuleTable rules;
  FileTable t = build_table(rows, rules);
  auto expected = readelf_rows(path, "-wF");
  ASSERT_GT(expected.size(), 100u) << "readelf printed nothing for " << path;
  size_t failures = 0;
  for (const Expected &e : expected) {
    if (e.pc == 0)
      continue; // FDEs of discarded code, relocated to 0: never used
    check(e, lookup(t, rules, e.pc), path);
    if (::testing::Test::HasFailure() && ++failures > 5)
      return;
  }
  std::cerr << path << ": " << expected.size() << " rows checked, "
            << t.rows.size() << " table rows, " << t.pages.size() << " pages, "
            << rules.rules().size() << " rules, eh_frame "
            << cfi->eh_frame.size() << " bytes\n";
}

TEST(Cfi, GlibcAgreesWithReadelf) {
  compare_with_readelf("/lib/x86_64-linux-gnu/libc.so.6");
}

TEST(Cfi, LibstdcxxAgreesWithReadelf) {
  compare_with_readelf("/lib/x86_64-linux-gnu/libstdc++.so.6");
}

TEST(Cfi, Python3AgreesWithReadelf) {
  compare_with_readelf("/usr/bin/python3");
}

TEST(Cfi, LoaderAgreesWithReadelf) {
  compare_with_readelf("/lib64/ld-linux-x86-64.so.2");
}

// Addresses no FDE covers have no rule; the signal trampoline and PLT
// stubs get their own kinds.
TEST(Cfi, GapsSignalFramesAndPlt) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  UniqueFd fd(open(libc.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd)
    GTEST_SKIP();
  auto cfi = read_elf_cfi(fd.get(), CfiWant::EhFrame);
  ASSERT_TRUE(cfi);
  auto rows = parse_cfi({cfi->eh_frame, cfi->eh_frame_vaddr, true}, nullptr);
  bool signal = false, plt = false, gap = false;
  for (const Row &r : rows) {
    signal |= r.rule.kind == UW_RULE_SIGNAL;
    plt |= r.rule.kind == UW_RULE_PLT;
    gap |= r.rule.kind == UW_RULE_NONE;
  }
  EXPECT_TRUE(signal) << "__restore_rt";
  EXPECT_TRUE(plt);
  EXPECT_TRUE(gap);
  for (size_t i = 1; i < rows.size(); i++)
    ASSERT_LT(rows[i - 1].pc, rows[i].pc);
}

// Hostile bytes: truncated and garbled sections parse to something or
// nothing, never past their end.
TEST(Cfi, GarbageIsBounded) {
  std::string junk(4096, '\xff');
  EXPECT_TRUE(parse_cfi({junk, 0, true}, nullptr).empty());
  std::string zero(64, '\0');
  EXPECT_TRUE(parse_cfi({zero, 0, false}, nullptr).empty());
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  UniqueFd fd(open(libc.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd)
    return;
  auto cfi = read_elf_cfi(fd.get(), CfiWant::EhFrame);
  ASSERT_TRUE(cfi);
  for (size_t cut : {size_t{7}, size_t{100}, cfi->eh_frame.size() / 2}) {
    std::string part = cfi->eh_frame.substr(0, cut);
    parse_cfi({part, cfi->eh_frame_vaddr, true}, nullptr);
    std::string flipped = cfi->eh_frame;
    for (size_t i = cut; i < flipped.size(); i += 97)
      flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    parse_cfi({flipped, cfi->eh_frame_vaddr, true}, nullptr);
  }
}

} // namespace
} // namespace offcpu::unwind
