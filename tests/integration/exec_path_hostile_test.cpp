// The path a process was run by (AT_EXECFN, see src/symbolize/exec_path.h)
// is the process's own memory: a user can write anything there. Each attack
// as the unprivileged test user: the string names a root-only file, a FIFO,
// or holds a newline; offcpu must end on time, leak nothing and keep the
// module's name from /proc/PID/maps.
#include <sys/stat.h>

#include "support/hostile_fixture.h"

namespace offcpu {
namespace {

constexpr double kWindow = 1.0;

class ExecPathHostile : public test::HostileFiles {
protected:
  void SetUp() override {
    HostileFiles::SetUp();
    if (IsSkipped())
      return;
    // A copy the user can run, and a long name for it: the path run is
    // the room the workload has to write its own string in.
    binary_ = dir_ + "/usability-app";
    ASSERT_TRUE(
        test::ok(test::run({"/bin/cp", WORKLOAD_USABILITY, binary_}, 30)));
    ASSERT_EQ(chmod(binary_.c_str(), 0755), 0);
    long_name_ = dir_ + "/" + std::string(200, 'L');
    ASSERT_EQ(symlink(binary_.c_str(), long_name_.c_str()), 0);
  }

  // Runs the workload by its long name, writing `fake` over AT_EXECFN, and
  // offcpu on it (--no-symbolize folded: the module's name in each frame).
  test::Timed trace_faked(const std::string &fake, test::Workload *&out) {
    workload_ = std::make_unique<test::Workload>(
        std::vector<std::string>{long_name_, "execfn", fake}, uid_, gid_);
    out = workload_.get();
    if (!workload_->ready())
      return {};
    return test::run_offcpu({"-p", workload_->pid(), "--no-symbolize", "-f",
                             "-o", "-", "-o", dir_ + "/out.txt",
                             std::to_string(kWindow)},
                            kWindow);
  }

  // Frames still named by the file mapped, never by the fake.
  void expect_maps_name(const test::Timed &t, const std::string &fake) {
    EXPECT_NE(t.r.out.find(";usability-app+0x"), std::string::npos) << t.r.out;
    const std::string fake_name = fake.substr(fake.rfind('/') + 1);
    EXPECT_EQ(t.r.out.find(fake_name + "+0x"), std::string::npos) << t.r.out;
  }

  std::string binary_, long_name_;
  std::unique_ptr<test::Workload> workload_;
};

TEST_F(ExecPathHostile, RootOnlyFileIsNotBelievedNorRead) {
  const std::string marker = write_secret();
  test::Workload *w = nullptr;
  auto t = trace_faked(secret_, w);
  ASSERT_TRUE(w->ready()) << w->error();
  test::expect_clean_run(t, kWindow, "AT_EXECFN naming a root-only file");
  expect_maps_name(t, secret_);
  expect_no_leak(t, marker);
  EXPECT_EQ(test::slurp(dir_ + "/out.txt").find("secret"), std::string::npos);
}

TEST_F(ExecPathHostile, FifoDoesNotHang) {
  const std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  const std::string fifo = scratch + "/fifo";
  ASSERT_TRUE(test::ok(run_as_user({"/usr/bin/mkfifo", fifo})));
  test::Workload *w = nullptr;
  auto t = trace_faked(fifo, w);
  ASSERT_TRUE(w->ready()) << w->error();
  test::expect_clean_run(t, kWindow, "AT_EXECFN naming a FIFO");
  expect_maps_name(t, fifo);
}

// A symlink to the very binary, with a newline in its name: the right
// file, but the name would split the text report's lines.
TEST_F(ExecPathHostile, NewlineInThePathRunIsNotUsed) {
  const std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  const std::string evil = scratch + "/evil\nname";
  ASSERT_TRUE(test::ok(run_as_user({"/bin/ln", "-s", binary_, evil})));
  test::Workload *w = nullptr;
  auto t = trace_faked(evil, w);
  ASSERT_TRUE(w->ready()) << w->error();
  test::expect_clean_run(t, kWindow, "AT_EXECFN with a newline");
  expect_maps_name(t, evil);
  const std::string text = test::slurp(dir_ + "/out.txt");
  EXPECT_EQ(text.find("evil"), std::string::npos) << text;
}

} // namespace
} // namespace offcpu
