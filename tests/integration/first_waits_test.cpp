// The first waits of a process traced from its start (issue #27, bugs 1, 6
// and 10): `-- COMMAND` and `-p` of a process started just before get whole
// stacks from the first wait on, not frame-pointer fragments for the whole
// run; a clean run says at most one line on stderr besides "Tracing...",
// the details with -v. The real binary against tests/workloads/first_waits.c
// (no frame pointers, 1 ms sleeps in fw_nap from its first instruction).
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"

namespace offcpu {
namespace {

constexpr const char *kComm = "first_waits";

using Share = test::WholeShare;

// The workload's sleeps and the part of their time on whole user stacks
// (fw_nap and main both in them).
Share whole_share(const std::string &folded) {
  return test::whole_share(folded, kComm, "nanosleep",
                           [](const test::FoldedLine &l) {
                             return test::frame_index(l, "fw_nap") >= 0 &&
                                    test::frame_index(l, "main") >= 0;
                           });
}

// stderr's lines but "Tracing ..." (the one line every run prints).
std::vector<std::string> stderr_lines(const std::string &err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.find("offcpu: Tracing ") != 0)
      out.push_back(line);
  return out;
}

class FirstWaits : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
  }
};

// 1,500 naps of 1 ms (about 1.6 s) traced from the command's exec: its
// first waits come before its tables, yet nearly all its time is whole, in
// every run. Before, 2 runs in 8 had libc without a table for the whole run
// (its mapping was read during the exec, then gone: cached as unreadable),
// and the sleeps stopped at clock_nanosleep; later about 1 run in 10 still
// did (issue #27, not reproduced since on the 2-vCPU VM): a thread that
// sleeps at one place reuses its first walk for the whole run, so one bad
// walk would stay. Memos are now walked again every UW_MEMO_RECHECK reuses
// and a walk that disagrees is a warning, which the checks below catch.
TEST_F(FirstWaits, CommandHasWholeStacksFromTheStart) {
  for (int run = 0; run < 8; run++) {
    SCOPED_TRACE("run " + std::to_string(run));
    auto r =
        test::run({OFFCPU_BIN, "-f", "--", WORKLOAD_FIRST_WAITS, "1500"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Share s = whole_share(r.out);
    ASSERT_GT(s.sleep_us, 1000000u) << r.out << r.err;
    EXPECT_GE(s.whole(), 0.95) << s.describe() << r.err;
    // What was not whole is one summary line at most.
    EXPECT_LE(stderr_lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.find("disagreed"), std::string::npos) << r.err;
  }
}

// A command that execs itself 30 times in its first 60 ms, then naps
// 1,000 times: each exec maps the same files again at other addresses, as
// many mappings. The walker took such an image for the one installed
// before (same map_count) and ended every walk outside its mappings:
// [Missed User Stack] for the rest of the run in 4 runs of 5.
TEST_F(FirstWaits, CommandThatExecsItselfHasWholeStacks) {
  for (int run = 0; run < 3; run++) {
    SCOPED_TRACE("run " + std::to_string(run));
    auto r = test::run(
        {OFFCPU_BIN, "-f", "--", WORKLOAD_FIRST_WAITS, "1000", "30"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Share s = whole_share(r.out);
    ASSERT_GT(s.sleep_us, 800000u) << r.out << r.err;
    EXPECT_GE(s.whole(), 0.95) << s.describe() << r.err;
  }
}

// A process started just before: its tables are built before the window
// opens, so its first waits are whole too, none walked before its tables
// (before, they were built after the attach: 3 waits of the first ms were
// frame-pointer fragments in every run), and every run is whole (before
// the memo recheck, 1 run in 3 to 1 in 8 had every wait stop at
// clock_nanosleep, issue #27).
TEST_F(FirstWaits, PidStartedJustBeforeHasWholeStacksFromTheStart) {
  for (int run = 0; run < 8; run++) {
    SCOPED_TRACE("run " + std::to_string(run));
    test::Subprocess w({WORKLOAD_FIRST_WAITS, "0"});
    test::sleep_seconds(0.02);
    auto r =
        test::run({OFFCPU_BIN, "-f", "-p", std::to_string(w.pid()), "1"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Share s = whole_share(r.out);
    ASSERT_GT(s.sleep_us, 500000u) << r.out << r.err;
    EXPECT_GE(s.whole(), 0.95) << s.describe() << r.err;
    EXPECT_EQ(r.err.find("unwind tables were ready"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("disagreed"), std::string::npos) << r.err;
  }
}

// A clean run: at most one line besides "Tracing..." by default (the
// summary of stacks that are not whole, if any); -v has the details and
// the cost.
TEST_F(FirstWaits, CleanRunSaysAtMostOneLineByDefault) {
  test::Subprocess w({WORKLOAD_FIRST_WAITS, "0"});
  test::sleep_seconds(0.2);
  const std::string pid = std::to_string(w.pid());
  auto quiet = test::run({OFFCPU_BIN, "-f", "-p", pid, "1"}, 60);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_NE(quiet.err.find("offcpu: Tracing "), std::string::npos) << quiet.err;
  EXPECT_LE(stderr_lines(quiet.err).size(), 1u) << quiet.err;
  EXPECT_EQ(quiet.err.find("cost: "), std::string::npos) << quiet.err;
  auto verbose = test::run({OFFCPU_BIN, "-v", "-f", "-p", pid, "1"}, 60);
  ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_NE(verbose.err.find("cost: "), std::string::npos) << verbose.err;
  EXPECT_NE(verbose.err.find("user unwind readiness: "), std::string::npos)
      << verbose.err;
  EXPECT_GT(stderr_lines(verbose.err).size(), 3u) << verbose.err;
}

} // namespace
} // namespace offcpu
