// The CFI parser and table builder against the hostile shapes of issue
// #26: what they cost is bounded by the rows that exist and by the file's
// budgets, never by the span of the addresses or by re-running a CIE.
#include <gtest/gtest.h>

#include "support/hostile_cfi.h"
#include "unwind/cfi.h"
#include "unwind/table.h"

namespace offcpu::unwind {
namespace {

using test::EhFrame;

CfiSection section_of(const EhFrame &e, std::string &keep) {
  keep = e.section();
  return {keep, 0x100000, true};
}

TEST(CfiBudget, CieInstructionsRunOncePerCie) {
  EhFrame e(99990);
  for (uint64_t i = 0; i < 1000; i++)
    e.fde(0x1000 + i * 16, 16, "\x41\x0e\x10");
  std::string keep;
  CfiStats st;
  auto rows = parse_cfi(section_of(e, keep), &st);
  EXPECT_EQ(st.fdes, 1000u);
  EXPECT_EQ(st.over, OverBudget::None);
  // The CIE's 99,995 steps once, then a few per FDE (not 10^8).
  EXPECT_LT(st.steps, 99995u + 1000u * 8);
  EXPECT_GE(rows.size(), 2000u);
}

TEST(CfiBudget, StepsRowsAndTimeStopTheFile) {
  EhFrame e;
  const std::string nops(200, '\0');
  for (uint64_t i = 0; i < 1000; i++)
    e.fde(0x1000 + i * 16, 16, nops);
  std::string keep;
  CfiBudget small;
  small.max_steps = 100000; // the file needs ~200,000
  CfiStats st;
  EXPECT_TRUE(parse_cfi(section_of(e, keep), &st, small).empty());
  EXPECT_EQ(st.over, OverBudget::Steps);
  EXPECT_LE(st.steps, small.max_steps + 1);

  EhFrame alt;
  alt.fde(0x1000, 0x10000, EhFrame::alternating(5000));
  CfiBudget rows;
  rows.max_rows = 1000;
  CfiStats st2;
  EXPECT_TRUE(parse_cfi(section_of(alt, keep), &st2, rows).empty());
  EXPECT_EQ(st2.over, OverBudget::Rows);

  CfiBudget late;
  late.deadline_ns = 1; // long past: the first clock check stops it
  CfiStats st3;
  EXPECT_TRUE(parse_cfi(section_of(e, keep), &st3, late).empty());
  EXPECT_EQ(st3.over, OverBudget::Time);
  EXPECT_LE(st3.steps, 4096u);
}

TEST(CfiBudget, RowsOutsideExecutableSegmentsAreDropped) {
  EhFrame e;
  e.fde(0x1000, 0x100, "\x41\x0e\x10");
  e.fde(0x1000 + (uint64_t{1} << 47), 0x100, "\x41\x0e\x10");
  e.fde(~uint64_t{0} - 0x1fff, 0x1000, "\x41\x0e\x10");
  std::string keep;
  auto rows = parse_cfi(section_of(e, keep), nullptr);
  ASSERT_FALSE(rows.empty());
  uint64_t dropped = 0;
  auto in = clip_rows(rows, {{0x1000, 0x1080}}, &dropped);
  EXPECT_EQ(dropped, 4u); // two rules in each FDE outside
  ASSERT_FALSE(in.empty());
  EXPECT_EQ(in.front().pc, 0x1000u);
  EXPECT_EQ(in.back().pc, 0x1080u); // cut at the segment's end
  EXPECT_EQ(in.back().rule.kind, UW_RULE_NONE);
}

TEST(CfiBudget, PagesFollowRowsNotAddressSpans) {
  EhFrame e;
  e.fde(0x1000, 0x100, "\x41\x0e\x10");
  e.fde(0x1000 + (uint64_t{1} << 47), 0x100, "\x41\x0e\x10");
  e.fde(~uint64_t{0} - 0x1fff, 0x1000, "\x41\x0e\x10");
  std::string keep;
  auto rows = parse_cfi(section_of(e, keep), nullptr);
  EXPECT_EQ(table_pages(rows), 3u);
  RuleTable rules;
  FileTable t = build_table(rows, rules);
  EXPECT_EQ(t.runs.size(), 3u);
  EXPECT_EQ(t.pages.size(), 3u);
  Rule inside = lookup(t, rules, 0x1001);
  EXPECT_EQ(inside.kind, UW_RULE_CFA);
  EXPECT_EQ(inside.cfa_off, 16);
  EXPECT_EQ(lookup(t, rules, 0x1000 + (uint64_t{1} << 47) + 5).cfa_off, 16);
  EXPECT_EQ(lookup(t, rules, ~uint64_t{0} - 0x1000).cfa_off, 16);
  EXPECT_EQ(lookup(t, rules, uint64_t{1} << 40).kind, UW_RULE_NONE);
}

TEST(CfiBudget, RowsSpreadTooThinHaveNoTable) {
  EhFrame e;
  for (uint64_t i = 0; i < 1000; i++)
    e.fde(0x1000 + (i << 40), 0x100, "\x41\x0e\x10");
  std::string keep;
  auto rows = parse_cfi(section_of(e, keep), nullptr);
  ASSERT_EQ(rows.size(), 3000u);
  // Four runs across 2^50 bytes: far past the allowance, counted without
  // allocating a page.
  EXPECT_GT(table_pages(rows), page_allowance(rows.size()));
  RuleTable rules;
  FileTable t = build_table(rows, rules);
  EXPECT_TRUE(t.pages.empty());
  EXPECT_TRUE(t.rows.empty());
}

TEST(CfiBudget, ALongFunctionKeepsItsPages) {
  // One FDE over 64 KiB with two rows: every page carries its rule.
  EhFrame e;
  e.fde(0x10000, 0x10000, "\x41\x0e\x10");
  std::string keep;
  auto rows = parse_cfi(section_of(e, keep), nullptr);
  RuleTable rules;
  FileTable t = build_table(rows, rules);
  EXPECT_EQ(t.pages.size(), 16u);
  EXPECT_EQ(lookup(t, rules, 0x1f000).cfa_off, 16);
  EXPECT_EQ(lookup(t, rules, 0x20000).kind, UW_RULE_NONE);
}

TEST(CfiBudget, RulesOfAFileGivenUpAreForgotten) {
  EhFrame e;
  e.fde(0x1000, 0x10000, EhFrame::distinct(5000));
  std::string keep;
  auto rows = parse_cfi(section_of(e, keep), nullptr);
  RuleTable rules;
  const size_t before = rules.rules().size();
  build_table(rows, rules);
  EXPECT_GE(rules.rules().size(), before + 5000);
  rules.truncate(before);
  EXPECT_EQ(rules.rules().size(), before);
  // Interned again from scratch: the ids are reused, not leaked.
  build_table(rows, rules);
  EXPECT_GE(rules.rules().size(), before + 5000);
  EXPECT_LT(rules.rules().size(), before + 5010);
}

} // namespace
} // namespace offcpu::unwind
