// What to trace: a command with its children (-- COMMAND), the children of
// a traced PID (--children), a cgroup and what is below it (--cgroup,
// --per-cgroup), processes by name (-n), including those that start later.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class Scope : public test::RootTest {};

std::set<std::string> comms(const std::vector<test::FoldedLine> &lines) {
  std::set<std::string> out;
  for (const auto &l : lines)
    out.insert(l.frames[0]);
  return out;
}

bool any_with(const std::vector<test::FoldedLine> &lines,
              const std::string &comm, const std::string &frame) {
  for (const auto &l : lines)
    if (l.frames[0] == comm && test::frame_index(l, frame) >= 0)
      return true;
  return false;
}

TEST_F(Scope, CommandIsTracedWithItsChildrenUntilItExits) {
  // 20 children forked in batches of 5, each blocking 20 ms.
  double t0 = test::now_seconds();
  auto r = test::run(
      {OFFCPU_BIN, "-f", "--", WORKLOAD_STORM, "fork", "20", "5", "20"}, 60);
  double took = test::now_seconds() - t0;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, 5.0) << "ends when the command does";
  auto lines = test::parse_folded(
      r.out.substr(r.out.find('\n', r.out.find("done")) + 1));
  EXPECT_TRUE(any_with(lines, "stormchild", "storm_child_block"))
      << "children are traced:\n"
      << r.out;
  EXPECT_TRUE(comms(lines).count("offcpu_storm")) << "and the command itself";
  // Nothing else on the machine.
  for (const std::string &c : comms(lines))
    EXPECT_TRUE(c == "stormchild" || c == "offcpu_storm") << c;
}

TEST_F(Scope, CommandsExitStatusAndUserAreItsOwn) {
  auto failed = test::run(
      {OFFCPU_BIN, "-q", "-f", "--", "/bin/sh", "-c", "sleep 0.1; exit 7"}, 30);
  EXPECT_EQ(failed.exit_code, 7) << failed.err;
  // Through sudo, the command runs as the user who ran sudo.
  auto as_user = test::run({"/usr/bin/env", "SUDO_UID=65534", "SUDO_GID=65534",
                            OFFCPU_BIN, "-q", "-f", "--", "/usr/bin/id", "-u"},
                           30);
  ASSERT_EQ(as_user.exit_code, 0) << as_user.err;
  EXPECT_EQ(as_user.out.substr(0, as_user.out.find('\n')), "65534");
  auto missing =
      test::run({OFFCPU_BIN, "-f", "--", "/nonexistent/command"}, 10);
  EXPECT_EQ(missing.exit_code, 127) << "as env and timeout exit";
  EXPECT_NE(missing.err.find("cannot run /nonexistent/command"),
            std::string::npos)
      << missing.err;
}

TEST_F(Scope, ChildrenOfAPidForkedAfterTheStart) {
  // Forks until the test ends (the destructor kills it): a fixed count ran
  // out before the second run's tracing began on a loaded CI host.
  test::Subprocess storm({WORKLOAD_STORM, "fork", "1000000", "5", "20"});
  auto ready = storm.read_line(10);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  std::string pid = ready->substr(6);
  auto without =
      test::parse_folded(test::run({OFFCPU_BIN, "-p", pid, "-f", "1"}, 30).out);
  EXPECT_FALSE(any_with(without, "stormchild", "storm_child_block"))
      << "-p alone: only the PID's own threads";
  auto with = test::parse_folded(
      test::run({OFFCPU_BIN, "-p", pid, "--children", "-f", "1"}, 30).out);
  EXPECT_TRUE(any_with(with, "stormchild", "storm_child_block"))
      << "--children: what it forks after the start";
}

// Where cgroup v2 is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified on
// hosts with the hybrid layout.
std::string cgroup2_root() {
  for (const char *p : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    struct statfs fs {};
    if (statfs(p, &fs) == 0 && static_cast<unsigned long>(fs.f_type) ==
                                   0x63677270 /* CGROUP2_SUPER_MAGIC */)
      return p;
  }
  return "";
}

TEST_F(Scope, OnlyTasksOfTheCgroupAndBelow) {
  std::string root = cgroup2_root();
  if (root.empty())
    GTEST_SKIP() << "no cgroup v2 hierarchy";
  std::string name = "offcpu-test-" + std::to_string(getpid());
  std::string dir = root + "/" + name;
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  ASSERT_EQ(mkdir((dir + "/inner").c_str(), 0755), 0);
  test::Subprocess w({WORKLOAD_BLOCKER, "--no-spinner"});
  auto ready = w.read_line(10);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  // Below the traced cgroup: it counts too.
  std::ofstream(dir + "/inner/cgroup.procs") << ready->substr(6) << "\n";
  auto r =
      test::run({OFFCPU_BIN, "--cgroup", name, "--per-cgroup", "-f", "1"}, 30);
  w.signal(SIGKILL);
  w.wait(5);
  test::sleep_seconds(0.2);
  rmdir((dir + "/inner").c_str());
  rmdir(dir.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty());
  std::set<std::string> threads;
  for (const auto &l : lines) {
    EXPECT_EQ(l.frames[0], "/" + name + "/inner") << l.text;
    threads.insert(l.frames[1]);
  }
  EXPECT_TRUE(threads.count("sleeper") && threads.count("piperd"))
      << "the workload's threads";
  EXPECT_FALSE(threads.count("offcpu")) << "nothing outside the cgroup";
}

TEST_F(Scope, SystemdScopeWhereSystemdRuns) {
  std::ifstream comm("/proc/1/comm");
  std::string init;
  std::getline(comm, init);
  if (init != "systemd" || access("/usr/bin/systemd-run", X_OK) != 0)
    GTEST_SKIP() << "PID 1 is " << init << ", not systemd";
  test::Subprocess unit({"/usr/bin/systemd-run", "--scope", "--unit",
                         "offcpu-test.scope", WORKLOAD_BLOCKER,
                         "--no-spinner"});
  test::sleep_seconds(1.0);
  auto r = test::run({OFFCPU_BIN, "--cgroup", "/system.slice/offcpu-test.scope",
                      "--per-cgroup", "-f", "1"},
                     30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty());
  for (const auto &l : lines)
    EXPECT_EQ(l.frames[0], "offcpu-test.scope") << l.text;
}

TEST_F(Scope, ProcessesByNameIncludingThoseThatStartLater) {
  // A name of its own (comm comes from the executed file's name), so that
  // other runs of the workload do not match.
  std::string name = "nblk" + std::to_string(getpid() % 100000);
  std::string link = "/tmp/" + name;
  unlink(link.c_str());
  ASSERT_EQ(symlink(WORKLOAD_BLOCKER, link.c_str()), 0);
  test::Subprocess tracer({OFFCPU_BIN, "-n", name, "-f", "2"});
  test::sleep_seconds(0.5);
  test::Subprocess w({link, "--no-spinner"});
  ASSERT_TRUE(w.read_line(10));
  auto r = tracer.wait(30);
  unlink(link.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  auto names = comms(lines);
  EXPECT_TRUE(names.count("sleeper") && names.count("stuck")) << r.out;
  for (const std::string &c : names)
    EXPECT_TRUE(c == "sleeper" || c == "piperd" || c == "pipewr" ||
                c == "mutexh" || c == "mutexw" || c == "stuck" || c == name)
        << c << " is not a thread of " << name;
}

} // namespace
} // namespace offcpu
