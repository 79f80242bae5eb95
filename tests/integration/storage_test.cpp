// The stack storage and the aggregation map under a busy host's load: a
// storm of distinct stacks must not take the stacks of the threads blocked
// all along (the stop pass keeps a share of the storage), a loss is
// reported with the off-CPU time it cost, and a thread churner filling the
// aggregation map does not crowd out the other processes' time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

constexpr double kWindowS = 2;
constexpr uint64_t kWindowUs = 2000000;

class Storage : public test::RootTest {};

// A workload started before the run: "ready PID".
struct Workload {
  explicit Workload(const std::vector<std::string> &args) : proc(args) {
    auto line = proc.read_line(20);
    if (!line || line->rfind("ready ", 0) != 0)
      throw std::runtime_error("workload did not start");
    pid = std::stoi(line->substr(6));
  }
  test::Subprocess proc;
  int pid = 0;
};

std::vector<std::string> storm_args(std::vector<std::string> rest) {
  rest.insert(rest.begin(), WORKLOAD_STACK_STORM);
  return rest;
}

// The time a warning line says its loss cost, in us; -1 if no such line.
// "warning: N <what> (P% of off-CPU time, T s)".
double lost_us(const std::string &err, const std::string &what) {
  std::smatch m;
  const std::regex re("warning: [0-9]+ " + what +
                      " \\(([0-9.]+)% of off-CPU time, ([0-9.]+) s\\)");
  if (!std::regex_search(err, m, re))
    return -1;
  return std::stod(m[2]) * 1e6;
}

bool has_frame(const test::FoldedLine &l, const std::string &frame) {
  return test::frame_index(l, frame) >= 0;
}

size_t count_frame(const test::FoldedLine &l, const std::string &frame) {
  size_t n = 0;
  for (const std::string &f : l.frames)
    n += f == frame;
  return n;
}

bool missed(const test::FoldedLine &l) {
  return l.text.find("[Missed") != std::string::npos;
}

// The bucket of a process's waits that found the aggregation map full.
bool overflow_bucket(const test::FoldedLine &l) {
  return l.frames.size() == 3 && l.frames[1] == "[Missed User Stack]" &&
         l.frames[2] == "[Missed Kernel Stack]";
}

TEST_F(Storage,
       AStormOfStacksLeavesTheStopPassTheStacksOfThreadsBlockedAllAlong) {
  constexpr int kHolders = 8;
  Workload w(storm_args({"stacks", std::to_string(kHolders), "2"}));
  // Whole system, with room for far fewer stacks than the storm makes
  // (65,536 paths): the storage fills within milliseconds. -v: the loss's
  // own line, with its time (the summary line has its share).
  auto r = test::run({OFFCPU_BIN, "-q", "-v", "-f", "--stack-storage-size",
                      "4096", std::to_string(static_cast<int>(kWindowS))},
                     120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::parse_folded(r.out);

  // Blocked before the run and for all of it: whole stacks, the window's
  // time each.
  for (int i = 0; i < kHolders; i++) {
    char comm[16];
    snprintf(comm, sizeof(comm), "hold%02d", i);
    uint64_t us = 0;
    for (const auto &l : lines) {
      if (l.frames[0] != comm)
        continue;
      us += l.value;
      EXPECT_FALSE(missed(l)) << l.text;
      EXPECT_EQ(count_frame(l, "hold_deep"), static_cast<size_t>(4 + i))
          << l.text;
      EXPECT_TRUE(has_frame(l, "block_forever")) << l.text;
      EXPECT_TRUE(has_frame(l, "vfs_read")) << l.text;
    }
    EXPECT_GE(us, kWindowUs * 95 / 100) << comm;
    EXPECT_LE(us, kWindowUs * 105 / 100) << comm;
  }

  // The loss is reported with its time: that of the waits shown without
  // their stacks, the storm's at least.
  const double reported = lost_us(r.err, "stacks lost");
  ASSERT_GT(reported, 0) << r.err;
  EXPECT_NE(r.err.find("raise --stack-storage-size to 16384 (now 4096"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("offcpu: warning: [0-9.]+% of the off-CPU time is on "
                        "stacks that are not whole: [^\\n]*[0-9.]+% stack "
                        "storage full \\([0-9]+ stacks\\): raise "
                        "--stack-storage-size to 16384 \\(now 4096\\)")))
      << r.err;
  uint64_t storm_missed = 0, all_missed = 0;
  for (const auto &l : lines) {
    if (!missed(l))
      continue;
    all_missed += l.value;
    if (l.frames[0].rfind("storm", 0) == 0)
      storm_missed += l.value;
  }
  EXPECT_GT(storm_missed, kWindowUs / 2) << "the storm lost most stacks";
  // Rounded to the ms on stderr, to the us per line in the output.
  EXPECT_GE(reported, static_cast<double>(storm_missed) * 0.95 - 1000) << r.err;
  EXPECT_LE(reported, static_cast<double>(all_missed) * 1.05 + 1000) << r.err;
}

TEST_F(Storage, AThreadChurnerDoesNotCrowdOutTheOtherProcesses) {
  constexpr int kSteady = 4;
  Workload steady(storm_args({"steady", std::to_string(kSteady)}));
  Workload churn(storm_args({"churn", "8"}));
  // Room for a few dozen (thread, stack) keys: the churner's new threads
  // fill it at once.
  auto r = test::run(
      {OFFCPU_BIN, "-q", "-v", "-f", "-p",
       std::to_string(steady.pid) + "," + std::to_string(churn.pid),
       "--max-entries", "64", std::to_string(static_cast<int>(kWindowS))},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::parse_folded(r.out);

  uint64_t steady_us = 0, churn_us = 0, buckets_us = 0;
  for (const auto &l : lines) {
    if (l.frames[0].rfind("steady", 0) == 0)
      steady_us += l.value;
    else if (l.frames[0] == "churn")
      churn_us += l.value;
    if (overflow_bucket(l))
      buckets_us += l.value;
  }
  // The other process keeps all its time: blocked all along, each thread.
  EXPECT_GE(steady_us, kSteady * kWindowUs * 95 / 100) << r.out;
  EXPECT_LE(steady_us, kSteady * kWindowUs * 105 / 100) << r.out;
  // The churner's waits past the map's room are kept in its bucket, and
  // the warning says what they weigh: the buckets' time, to the ms.
  EXPECT_GT(churn_us, 0u) << r.out;
  const double reported =
      lost_us(r.err, "waits found the aggregation map full");
  ASSERT_GT(reported, 0) << r.err;
  EXPECT_NEAR(reported, static_cast<double>(buckets_us),
              static_cast<double>(buckets_us) * 0.05 + 1000)
      << r.err;
  EXPECT_NE(r.err.find("raise --max-entries (now 64)"), std::string::npos)
      << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err,
      std::regex("% kept without stacks, the aggregation map full "
                 "\\([0-9]+ waits\\): raise --max-entries \\(now 64\\)")))
      << r.err;
  EXPECT_NE(r.err.find("raise --max-entries (now 64)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("waits lost"), std::string::npos) << r.err;
}

} // namespace
} // namespace offcpu
