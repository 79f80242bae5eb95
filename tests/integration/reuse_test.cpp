// Reusing a thread's last user stack when it blocks again at the same place
// (bpf/user_unwind.bpf.h): the reused stacks must be the ones a walk gives.
// The workload's `alt` thread reaches one sleep through two outer functions
// with identical registers at the system call; only a word far up its stack
// tells them apart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class Reuse : public test::RootTest {
protected:
  void SetUp() override {
    RootTest::SetUp();
    if (IsSkipped())
      return;
    auto line = workload_.read_line(20);
    ASSERT_TRUE(line && line->rfind("ready ", 0) == 0);
    pid_ = line->substr(6);
    test::sleep_seconds(0.3);
  }

  test::RunResult offcpu(std::vector<std::string> extra) {
    std::vector<std::string> args = {OFFCPU_BIN, "-p",           pid_,
                                     "-v",       "--per-thread", "-f"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("3");
    auto r = test::run(args, 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  }

  // "stack reuse: user N reused, C walked again (...), M disagreed; kernel
  // N reused, C walked again, M disagreed": user, then kernel counts.
  static std::vector<uint64_t> reuse_counts(const std::string &err) {
    std::smatch m;
    static const std::regex re(
        "stack reuse: user ([0-9]+) reused, ([0-9]+) walked again .*, "
        "([0-9]+) disagreed; kernel ([0-9]+) reused, ([0-9]+) walked again, "
        "([0-9]+) disagreed");
    if (!std::regex_search(err, m, re))
      return {};
    std::vector<uint64_t> out;
    for (size_t i = 1; i <= 6; i++)
      out.push_back(std::stoull(m[i]));
    return out;
  }

  // Off-CPU time of `alt` under outer_left, under outer_right, and under
  // reuse_tick but neither (which a wrong stack would give).
  struct AltSplit {
    uint64_t left = 0, right = 0, neither = 0;
  };
  static AltSplit alt_split(const std::vector<test::FoldedLine> &lines) {
    AltSplit s;
    for (const auto &l : lines) {
      if (l.frames.empty() || l.frames[0].find("alt-") != 0 ||
          test::frame_index(l, "reuse_tick") < 0)
        continue;
      bool left = test::frame_index(l, "outer_left") >= 0;
      bool right = test::frame_index(l, "outer_right") >= 0;
      bool chain = test::frame_index(l, "reuse_chain1") >= 0 &&
                   test::frame_index(l, "reuse_chain2") >= 0 &&
                   test::frame_index(l, "reuse_chain3") >= 0;
      if (left != right && chain)
        (left ? s.left : s.right) += l.value;
      else
        s.neither += l.value;
    }
    return s;
  }

  test::Subprocess workload_{{WORKLOAD_REUSE}};
  std::string pid_;
};

TEST_F(Reuse, ReusedStacksAgreeWithAFreshWalk) {
  auto r = offcpu({"--verify-stack-reuse"});
  auto counts = reuse_counts(r.err);
  ASSERT_EQ(counts.size(), 6u) << r.err;
  // ping and pong block on one stack each a thousand times a second.
  EXPECT_GT(counts[0], 1000u) << r.err;
  EXPECT_EQ(counts[2], 0u) << r.err;
  EXPECT_GT(counts[3], 1000u) << r.err;
  EXPECT_EQ(counts[5], 0u) << r.err;
  EXPECT_EQ(r.err.find("disagreed with a fresh walk"), std::string::npos)
      << r.err;
  // Where the kernel allows (6.2+, x86-64: this machine), the checks read
  // the stack through the page tables, not by probe reads. The search for
  // the direct map fails only with memory encryption (key bits in entries).
  if (r.err.find("rdonly_cast yes") != std::string::npos) {
    EXPECT_NE(r.err.find("checked through the page tables"), std::string::npos)
        << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m,
                                  std::regex("([0-9]+) checks by probe read")))
        << r.err;
    EXPECT_LT(std::stoull(m[1]), counts[0] / 10) << r.err;
  }
}

// With -m above its default, a thread walked before has its stack left for
// the switch-in without a look at its memo at switch-out: the switch-in's
// walk finds the memo, for the waits that pass -m only (alt's 1 ms sleeps).
TEST_F(Reuse, StacksLeftForTheSwitchInAgreeWithAFreshWalk) {
  auto r = offcpu({"-m", "500", "--verify-stack-reuse"});
  if (r.err.find("checked through the page tables") == std::string::npos)
    GTEST_SKIP() << "no checks through the page tables here (6.2+): " << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.err, m,
      std::regex("([0-9]+) left for the switch-in \\(([0-9]+) taken")))
      << r.err;
  EXPECT_GT(std::stoull(m[2]), 1000u) << r.err;
  auto counts = reuse_counts(r.err);
  ASSERT_EQ(counts.size(), 6u) << r.err;
  EXPECT_GT(counts[0], 1000u) << r.err;
  EXPECT_EQ(counts[2], 0u) << r.err;
  AltSplit s = alt_split(test::parse_folded(r.out));
  EXPECT_GT(s.left + s.right, 1000000u) << r.out;
  EXPECT_EQ(s.neither, 0u) << r.out;
}

// The memo check tells the two callers apart whichever way it reads the
// stack: through the page tables (the default here) or by probe reads.
class ReuseCheck : public Reuse,
                   public ::testing::WithParamInterface<const char *> {};

TEST_P(ReuseCheck, SameRegistersDifferentCallerAreToldApart) {
  std::vector<std::string> extra;
  const std::string how = GetParam();
  if (how == "probe-reads")
    extra = {"--loader", "light-probe-reads"};
  if (how == "at-switch-in") // alt's 1 ms sleeps pass; stacks taken then
    extra = {"-m", "500"};
  auto r = offcpu(extra);
  if (how == "at-switch-in" &&
      r.err.find("checked through the page tables") != std::string::npos) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        r.err, m,
        std::regex("([0-9]+) left for the switch-in \\(([0-9]+) taken")))
        << r.err;
    EXPECT_GT(std::stoull(m[2]), 500u) << r.err;
  }
  auto counts = reuse_counts(r.err);
  ASSERT_EQ(counts.size(), 6u) << r.err;
  // alt's two paths leave the same registers: each return to the other
  // path changes one stack word, which the check catches. Each path keeps
  // its own memo (the thread's two ways; a memo that does not check rbp
  // matches both paths' registers and the other way is tried), so the
  // memos are consulted on most waits, reused where the words still hold,
  // walked again where they do not; the split below shows they were told
  // apart.
  EXPECT_GT(counts[0] + counts[1], 500u) << r.err;
  AltSplit s = alt_split(test::parse_folded(r.out));
  uint64_t total = s.left + s.right + s.neither;
  ASSERT_GT(total, 1000000u) << r.out; // > 1 s of the 3 s window, in us
  EXPECT_EQ(s.neither, 0u) << r.out;
  // Alternate sleeps of 1 ms: half each, give or take scheduling noise.
  EXPECT_NEAR(static_cast<double>(s.left) / static_cast<double>(total), 0.5,
              0.1)
      << r.out;
}

INSTANTIATE_TEST_SUITE_P(Reads, ReuseCheck,
                         ::testing::Values("page-tables", "probe-reads",
                                           "at-switch-in"));

TEST_F(Reuse, WithoutReuseTheSameStacks) {
  // With the state each wait began in: a preemption ([R]) can land at any
  // instruction, and on a busy machine often does; the stacks a thread
  // blocks on are what reuse must keep.
  auto with = test::parse_folded(offcpu({"--show-state"}).out);
  auto r = offcpu({"--no-stack-reuse", "--show-state"});
  auto counts = reuse_counts(r.err);
  ASSERT_EQ(counts.size(), 6u) << r.err;
  EXPECT_EQ(counts[0], 0u) << r.err;
  EXPECT_EQ(counts[3], 0u) << r.err;
  auto without = test::parse_folded(r.out);
  // The distinct stacks the looping threads block on, each with its time
  // (what each stack is matters, not its time, which differs run to run).
  auto stacks = [](const std::vector<test::FoldedLine> &lines) {
    std::map<std::string, uint64_t> out;
    for (const auto &l : lines) {
      if (l.frames.size() < 2 || l.frames[1] == "[R]")
        continue;
      std::string comm = l.frames[0].substr(0, l.frames[0].find('-'));
      if (comm != "alt" && comm != "ping" && comm != "pong")
        continue;
      std::string rest = comm;
      for (size_t i = 2; i < l.frames.size(); i++)
        rest += ";" + l.frames[i];
      out[rest] += l.value;
    }
    return out;
  };
  // Every stack a thread blocks on many times (100 ms or more in one run)
  // appears in the other run too; one-off waits (its first, a page fault)
  // may or may not fall in a window.
  auto a = stacks(with), b = stacks(without);
  auto heavy_in_both = [](const std::map<std::string, uint64_t> &from,
                          const std::map<std::string, uint64_t> &in,
                          const char *what) {
    size_t heavy = 0;
    for (const auto &[stack, us] : from) {
      if (us < 100000)
        continue;
      heavy++;
      EXPECT_TRUE(in.count(stack)) << what << ": " << stack << " (" << us
                                   << " us) missing from the other run";
    }
    return heavy;
  };
  EXPECT_GT(heavy_in_both(a, b, "with reuse"), 0u);
  EXPECT_GT(heavy_in_both(b, a, "without reuse"), 0u);
}

} // namespace
} // namespace offcpu
