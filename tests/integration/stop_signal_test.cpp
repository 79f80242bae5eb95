// SIGTERM and Ctrl-C end a busy run within a second, with the window closed
// at the signal and everything collected written out. The real offcpu
// traces a storm of short-lived processes (each a fresh exec: maps to read,
// tables to install, stacks to name) and its children, which keep it busy.
// (-p with --children rather than the whole system: a whole-system run
// would also trace whatever else runs on the host.)
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <regex>

#include "support/folded_parse.h"
#include "support/hostile_fixture.h"
#include "support/process.h"

namespace offcpu {
namespace {

uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

// The storm runs as an unprivileged user the test creates, from a copy of
// the workload that user can run.
class StopSignal : public test::HostileFiles,
                   public ::testing::WithParamInterface<int> {
protected:
  static std::string storm() { return bin_dir_ + "/storm"; }

  void SetUp() override {
    HostileFiles::SetUp();
    if (IsSkipped())
      return;
    if (access(storm().c_str(), X_OK) != 0) {
      ASSERT_TRUE(
          test::ok(test::run({"/bin/cp", WORKLOAD_STORM, storm()}, 30)) &&
          chmod(storm().c_str(), 0755) == 0);
    }
  }
};

TEST_P(StopSignal, EndsWithinASecondWithTheWindowClosedAtTheSignal) {
  const int sig = GetParam();
  // Far more children than the run sees: the storm lasts past the signal.
  test::Workload storm_run = start({storm(), "exec", "1000000", "20", "2"});
  ASSERT_TRUE(storm_run.ready()) << storm_run.error();

  test::Subprocess offcpu(
      {OFFCPU_BIN, "-p", storm_run.pid(), "--children", "-f", "-v"});
  test::sleep_seconds(3.0); // attached (a second or so) and tracing
  const uint64_t signal_ns = monotonic_now_ns();
  const double signal_s = test::now_seconds();
  offcpu.signal(sig);
  test::RunResult r = offcpu.wait(10);
  const double took = test::now_seconds() - signal_s;

  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(took, 1.0) << "ended " << took << " s after " << strsignal(sig)
                       << "\n"
                       << r.err;

  // Complete output: every line parses (parse_folded fails the test on
  // one that does not), and the storm's children are in it.
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  bool storm_seen = false;
  for (const auto &l : lines)
    storm_seen |= !l.frames.empty() && l.frames[0] == "stormchild";
  EXPECT_TRUE(storm_seen);

  // -v: "window: START to END ns (CLOCK_MONOTONIC)": END is the signal's
  // time (the handler ran just after kill() returned here).
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.err, m, std::regex(R"(window: (\d+) to (\d+) ns)")))
      << r.err;
  const uint64_t end = std::stoull(m[2]);
  EXPECT_GE(end, signal_ns);
  EXPECT_LT(end - signal_ns, 50000000u)
      << "window closed " << (end - signal_ns) / 1000000
      << " ms after the signal";
}

std::string signal_label(const ::testing::TestParamInfo<int> &p) {
  return p.param == SIGTERM ? "Sigterm" : "Sigint";
}

INSTANTIATE_TEST_SUITE_P(SigtermAndSigint, StopSignal,
                         ::testing::Values(SIGTERM, SIGINT), signal_label);

} // namespace
} // namespace offcpu
