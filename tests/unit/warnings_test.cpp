// The one line a run prints by default about stacks that are not whole
// (issue #27, bug 10): its share of the off-CPU time, by cause.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "collect/load_fallback.h"
#include "run/report.h"
#include "util/error.h"

namespace offcpu {
namespace {

TEST(Warnings, NothingIncompleteSaysNothing) {
  IncompleteStacks s;
  s.total_ns = 1000000000;
  EXPECT_EQ(incomplete_summary(s), "");
}

TEST(Warnings, SummaryGivesTheShareOfTimeByCause) {
  IncompleteStacks s;
  s.total_ns = 2000000000;
  s.partial_ns = 40000000; // 2%
  s.partial_waits = 38;
  s.no_kernel_ns = 2000000; // 0.1%
  s.no_kernel_waits = 3;
  const std::string line = incomplete_summary(s);
  EXPECT_EQ(line.rfind("offcpu: warning: 2.1% of the off-CPU time", 0), 0u)
      << line;
  EXPECT_NE(line.find("2.0% walked before their process's unwind tables"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("(38 waits)"), std::string::npos) << line;
  EXPECT_NE(line.find("0.1% without a kernel stack (3 waits)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("-v lists each cause"), std::string::npos) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
}

TEST(Warnings, BelowOnePercentIsANoteNotAWarning) {
  IncompleteStacks s;
  s.total_ns = 1000000000;
  s.no_user_ns = 500; // far below 0.1%
  s.no_user_waits = 1;
  const std::string line = incomplete_summary(s);
  EXPECT_EQ(line.rfind("offcpu: <0.1% of the off-CPU time", 0), 0u) << line;
}

TEST(Warnings, CountsWithoutTimeStillSaySo) {
  IncompleteStacks s;
  s.events.push_back("3 context switches the kernel did not run the hook for");
  const std::string line = incomplete_summary(s);
  EXPECT_NE(line.find("3 context switches"), std::string::npos) << line;
}

// Bug 3's losses are in the same line, with the option that really
// limits: then it is a warning whatever the share.
TEST(Warnings, StorageAndAggregationLossesAreInTheLineWithTheirOption) {
  IncompleteStacks s;
  s.total_ns = 10000000000;
  s.stack_storage_size = 4096;
  s.max_entries = 64;
  s.full_ns = 3000000000; // 30%
  s.full_stacks = 1158;
  s.overflow_ns = 500000000; // 5%
  s.overflow_waits = 812;
  const std::string line = incomplete_summary(s);
  EXPECT_EQ(line.rfind("offcpu: warning: 35.0% of the off-CPU time is on "
                       "stacks that are not whole: ",
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("30.0% stack storage full (1158 stacks): raise "
                      "--stack-storage-size to 16384 (now 4096); "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("5.0% kept without stacks, the aggregation map full "
                      "(812 waits): raise --max-entries (now 64); "),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("no option changes this"), std::string::npos) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;

  IncompleteStacks few = s;
  few.full_ns = 1000; // far below 1%: still a warning, an option helps
  few.overflow_waits = 0;
  few.overflow_ns = 0;
  EXPECT_EQ(incomplete_summary(few).rfind("offcpu: warning: <0.1%", 0), 0u)
      << incomplete_summary(few);
}

TEST(Warnings, LostTimeIsInTheShare) {
  IncompleteStacks s;
  s.total_ns = 1000000000;
  s.lost_ns = 100000000; // 10%
  s.lost_waits = 7;
  s.held_ns = 50000000; // 5%
  s.held_waits = 2;
  const std::string line = incomplete_summary(s);
  EXPECT_EQ(line.rfind("offcpu: warning: 15.0% of the off-CPU time is on "
                       "stacks that are not whole or lost: ",
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("both full (7 waits): raise --max-entries"),
            std::string::npos)
      << line;
}

// What the summary covers leaves the per-cause lines unless -v; the rest
// keep theirs, with the option to raise.
TEST(Warnings, SummarizedCausesHaveTheirOwnLinesOnlyWithVerbose) {
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  lost[OFFCPU_LOST_USER_STACK_WALK] = 4;
  lost[OFFCPU_LOST_STACK_MAP_FULL] = 2;
  EXPECT_EQ(describe_losses(lost, 16384, 10240, nullptr, kSummarizedLosses),
            "");
  const std::string all = describe_losses(lost, 16384, 10240);
  EXPECT_NE(all.find("4 user stacks could not be walked: not even their "
                     "first"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("raise --stack-storage-size to 65536 (now 16384)"),
            std::string::npos)
      << all;
  lost[OFFCPU_LOST_WAKER_STORE] = 3;
  EXPECT_NE(describe_losses(lost, 16384, 10240, nullptr, kSummarizedLosses)
                .find("3 wakers lost"),
            std::string::npos);
}

} // namespace
} // namespace offcpu

namespace offcpu {
namespace {

// The fallback warning: each failure with its errno, what loaded instead,
// and the cost of every step taken; nothing when no load failed.
TEST(LoadFallbacks, OneLineNamesFailuresReplacementAndCosts) {
  LoadFallbacks f;
  EXPECT_FALSE(f.any());
  EXPECT_EQ(f.warning("x"), "");
  f.failed("object A", -EACCES, "cost a");
  f.failed("object B", E2BIG, "cost b");
  EXPECT_TRUE(f.any());
  EXPECT_EQ(f.warning("object C"),
            "object A (" + errno_text(EACCES) + "); object B (" +
                errno_text(E2BIG) +
                ") failed to load; loaded object C instead: cost a; cost b "
                "(-v says why)");
}

} // namespace
} // namespace offcpu
