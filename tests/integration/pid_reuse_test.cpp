// Issue #27, bug 2: with --children (and -- COMMAND) a traced process's
// children join the traced set as they are forked. They must leave it when
// they exit: PIDs are reused, and a process that merely got a dead child's
// PID (a make run pulled in other users' clang and bash) is no one we were
// asked to trace. The test wraps PIDs around a small kernel.pid_max (set
// for the test, then restored) with a fork storm of the test user's, not
// a descendant of anything traced, until one of its processes is given the
// PID of the traced command's dead child.
#include <gtest/gtest.h>

#include <fstream>

#include "support/hostile_fixture.h"

namespace offcpu::test {
namespace {

constexpr const char *kPidMax = "/proc/sys/kernel/pid_max";
// New PIDs come from [300, kSmallPidMax) while the test runs (processes
// that have larger ones keep them): the storm wraps in a few thousand
// forks, and the rest of the machine keeps thousands of PIDs.
constexpr int kSmallPidMax = 4300;

// Sets kernel.pid_max for the test's lifetime.
class PidMax {
public:
  explicit PidMax(int value) {
    saved_ = slurp(kPidMax);
    ok_ = !saved_.empty() && write(std::to_string(value));
  }
  ~PidMax() {
    if (ok_)
      write(saved_);
  }
  bool ok() const { return ok_; }

private:
  static bool write(const std::string &v) {
    std::ofstream out(kPidMax);
    out << v;
    out.flush();
    return static_cast<bool>(out);
  }
  std::string saved_;
  bool ok_ = false;
};

class PidReuse : public HostileFiles {
protected:
  static void SetUpTestSuite() {
    HostileFiles::SetUpTestSuite();
    if (skip_.empty() &&
        (!ok(run({"/bin/cp", WORKLOAD_PID_REUSE, reuse()}, 30)) ||
         chmod(reuse().c_str(), 0755) != 0))
      skip_ = "could not copy the workload to " + bin_dir_;
  }
  static std::string reuse() { return bin_dir_ + "/pid_reuse"; }
};

TEST_F(PidReuse, AStrangerGivenADeadChildsPidIsNotTraced) {
  PidMax small(kSmallPidMax);
  ASSERT_TRUE(small.ok()) << "cannot set " << kPidMax;
  const std::string dir = user_scratch_dir();
  ASSERT_FALSE(dir.empty());
  // The traced command: forks a child that exits, whose PID it writes, and
  // one that stays (the control: children are followed).
  Subprocess offcpu(
      {OFFCPU_BIN, "-f", "--user", kUser, "--", reuse(), "parent", dir});
  std::string target;
  for (double t0 = now_seconds(); now_seconds() - t0 < 60;
       sleep_seconds(0.02)) {
    std::string text = slurp(dir + "/target");
    if (!text.empty() && text.back() == '\n') {
      target = text.substr(0, text.size() - 1);
      break;
    }
  }
  ASSERT_FALSE(target.empty())
      << "the traced command did not start: " << offcpu.wait(5).err;
  // Someone else's process, given the dead child's PID, blocks in a
  // function of its own while the window is open.
  Workload stranger = start({reuse(), "storm", target});
  ASSERT_TRUE(stranger.ready()) << stranger.error();
  ASSERT_EQ(stranger.pid(), target);
  sleep_seconds(1.0);
  std::ofstream(dir + "/done") << "\n"; // the command exits: the run ends
  RunResult r = offcpu.wait(60);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;

  EXPECT_TRUE(has_comm(r.out, "reuse_parent")) << r.out << r.err;
  EXPECT_NE(r.out.find("reuse_child_block"), std::string::npos)
      << "the command's live child was not traced:\n"
      << r.out;
  EXPECT_FALSE(has_comm(r.out, "reuse_stranger"))
      << "a process that got a dead child's PID (" << target
      << ") was traced:\n"
      << lines_with(r.out, "reuse_stranger");
  EXPECT_EQ(r.out.find("reuse_stranger_block"), std::string::npos);
}

} // namespace
} // namespace offcpu::test
