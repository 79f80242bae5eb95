// `offcpu -- COMMAND` started as sudo starts a command (issues #26, #27):
// the target user's HOME/USER/LOGNAME/SHELL, no fd above 2 unless
// --keep-fds, a command that ignores SIGTERM killed after the grace period
// and said so, no guessing of a user or group (a uid without a passwd
// entry, a half-set SUDO_*), and 127/126 for a command that is not there
// or cannot be run, before anything is traced.
#include <dirent.h>
#include <grp.h>
#include <sys/resource.h>

#include <map>
#include <set>

#include "support/hostile_fixture.h"

namespace offcpu {
namespace {

using test::HostileFiles;

class Command : public HostileFiles {
protected:
  // offcpu -q -f [opts] -- argv, with `env` assignments before it (through
  // /usr/bin/env, so SUDO_* reach offcpu as sudo would set them).
  test::RunResult run(const std::vector<std::string> &env,
                      const std::vector<std::string> &opts,
                      const std::vector<std::string> &argv,
                      double timeout = 60) {
    std::vector<std::string> full{"/usr/bin/env"};
    full.insert(full.end(), env.begin(), env.end());
    full.insert(full.end(), {OFFCPU_BIN, "-q", "-f"});
    full.insert(full.end(), opts.begin(), opts.end());
    full.push_back("--");
    full.insert(full.end(), argv.begin(), argv.end());
    return test::run(full, timeout);
  }
  std::vector<std::string> sudo_env() const {
    return {"SUDO_UID=" + std::to_string(uid_),
            "SUDO_GID=" + std::to_string(gid_),
            std::string("SUDO_USER=") + test::kUser};
  }
};

// NAME=value lines of `env` output, up to offcpu's own output.
std::map<std::string, std::string> env_lines(const std::string &out) {
  std::map<std::string, std::string> vars;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0 && line.find(' ') > eq)
      vars.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return vars;
}

// Any process whose command line holds `marker`.
bool process_with_arg(const std::string &marker) {
  std::unique_ptr<DIR, int (*)(DIR *)> proc(opendir("/proc"), closedir);
  while (const dirent *d = readdir(proc.get())) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9')
      continue;
    std::string cmdline =
        test::slurp(std::string("/proc/") + d->d_name + "/cmdline");
    if (cmdline.find(marker) != std::string::npos)
      return true;
  }
  return false;
}

TEST_F(Command, RunsWithTheTargetUsersHomeUserLognameAndShell) {
  const passwd *pw = getpwnam(test::kUser);
  ASSERT_NE(pw, nullptr);
  const std::string home = pw->pw_dir, shell = pw->pw_shell;
  // Root's own values, as `sudo -E` or a root shell would leave them.
  std::vector<std::string> env = sudo_env();
  env.insert(env.end(), {"HOME=/root", "USER=root", "LOGNAME=root",
                         "SHELL=/bin/bash", "OFFCPU_TEST_KEPT=yes"});
  for (const auto &opts :
       std::vector<std::vector<std::string>>{{}, {"--user", test::kUser}}) {
    SCOPED_TRACE(opts.empty() ? "SUDO_UID/SUDO_GID" : "--user");
    auto r = run(env, opts, {"/usr/bin/env"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto vars = env_lines(r.out);
    EXPECT_EQ(vars["HOME"], home);
    EXPECT_EQ(vars["USER"], test::kUser);
    EXPECT_EQ(vars["LOGNAME"], test::kUser);
    EXPECT_EQ(vars["SHELL"], shell);
    EXPECT_EQ(vars["OFFCPU_TEST_KEPT"], "yes") << "other variables as they are";
    EXPECT_FALSE(vars["PATH"].empty());
  }
  // And it is that user, with its own groups only: none of root's.
  auto ids = run(sudo_env(), {}, {"/bin/sh", "-c", "id -u; id -G"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  std::istringstream in(ids.out);
  std::string u, g;
  std::getline(in, u);
  std::getline(in, g);
  EXPECT_EQ(u, std::to_string(uid_));
  EXPECT_EQ(g, std::to_string(gid_));
}

TEST_F(Command, FdsAboveTwoAreClosedUnlessKeepFds) {
  // A pipe as fd 7 of offcpu, as a shell's `7<&0` passes one (stdin is the
  // test's pipe). The command lists its own fds: ls's directory is 3.
  auto list = [](const std::vector<std::string> &opts) {
    std::string args;
    for (const auto &o : opts)
      args += " " + o;
    return test::run({"/bin/sh", "-c",
                      std::string("exec \"$0\" -q -f") + args +
                          " -- /bin/ls /proc/self/fd 7<&0",
                      OFFCPU_BIN},
                     60);
  };
  auto fds_of = [](const test::RunResult &r) {
    std::set<int> fds;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() ||
          line.find_first_not_of("0123456789") != std::string::npos)
        break; // offcpu's own output follows
      fds.insert(std::stoi(line));
    }
    return fds;
  };
  auto closed = list({});
  ASSERT_EQ(closed.exit_code, 0) << closed.err;
  EXPECT_EQ(fds_of(closed), (std::set<int>{0, 1, 2, 3}))
      << "only stdin, stdout, stderr and ls's own directory:\n"
      << closed.out;
  auto kept = list({"--keep-fds"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_TRUE(fds_of(kept).count(7)) << "--keep-fds passes fd 7:\n" << kept.out;
}

// offcpu raises its own soft limit on descriptors (it keeps files that
// other users' processes map open: symbolize/symbolizer.cpp), and gives the
// command the limit it was started with: under a soft limit of 1,024 the
// command sees 1,024, and offcpu, its parent, more.
TEST_F(Command, TheCommandKeepsTheDescriptorLimitOffcpuWasGiven) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max <= 1024)
    GTEST_SKIP() << "a hard limit of " << limit.rlim_max
                 << " descriptors leaves nothing to raise";
  if (access("/usr/bin/prlimit", X_OK) != 0)
    GTEST_SKIP() << "no /usr/bin/prlimit (util-linux)";
  auto r = test::run({"/usr/bin/prlimit",
                      "--nofile=1024:" + std::to_string(limit.rlim_max),
                      OFFCPU_BIN, "-q", "-f", "--", "/bin/sh", "-c",
                      "ulimit -n; grep 'Max open files' /proc/$PPID/limits"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string own, parent;
  std::getline(in, own);
  std::getline(in, parent);
  EXPECT_EQ(own, "1024") << r.out;
  // "Max open files            SOFT                 HARD                 files"
  std::istringstream fields(parent);
  std::string max, open, files;
  uint64_t soft = 0;
  fields >> max >> open >> files >> soft;
  EXPECT_GT(soft, 1024u) << "offcpu's own: " << parent;
}

TEST_F(Command, CommandIgnoringSigtermIsKilledAfterTheGracePeriod) {
  const std::string marker = "61.0" + std::to_string(getpid());
  const double window = 1.0;
  const double t0 = test::now_seconds();
  auto r = test::run({OFFCPU_BIN, "-q", "-f", "1", "--", "/bin/sh", "-c",
                      "trap '' TERM; sleep " + marker},
                     60);
  const double took = test::now_seconds() - t0;
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << "the command's own status, killed:\n"
                                        << r.err;
  EXPECT_NE(r.err.find("after SIGTERM: killed with SIGKILL"), std::string::npos)
      << r.err;
  EXPECT_LT(took, window + 2.0 + 4.0) << "2 s of grace, not the 60 s sleep";
  EXPECT_GE(took, window + 2.0) << "SIGKILL only after the grace period";
  EXPECT_FALSE(process_with_arg(marker))
      << "the sleep it started is gone too: it would hold offcpu's stdout";
  auto lines = test::parse_folded(r.out);
  EXPECT_TRUE(test::has_comm(r.out, "sh") || test::has_comm(r.out, "sleep"))
      << "the output is complete:\n"
      << r.out;
  for (const auto &l : lines)
    EXPECT_TRUE(l.frames[0] == "sh" || l.frames[0] == "sleep") << l.frames[0];
}

// Ctrl-C from a terminal reaches the command too; a SIGINT or SIGTERM sent
// to offcpu alone (kill, systemd) does not. Either way the command must not
// outlive offcpu: it was left running, exit 0.
TEST_F(Command, StopSignalToOffcpuEndsACommandThatIgnoresSigterm) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string marker =
        "62.0" + std::to_string(getpid()) + std::to_string(sig);
    test::Subprocess p({OFFCPU_BIN, "-q", "-f", "--", "/bin/sh", "-c",
                        "trap '' TERM; echo started; exec sleep " + marker});
    auto started = p.read_line(30);
    ASSERT_TRUE(started && *started == "started");
    test::sleep_seconds(0.5);
    const double t0 = test::now_seconds();
    p.signal(sig);
    auto r = p.wait(30);
    EXPECT_LT(test::now_seconds() - t0, 2.0 + 4.0);
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
    EXPECT_NE(r.err.find("killed with SIGKILL"), std::string::npos) << r.err;
    EXPECT_TRUE(test::has_comm(r.out, "sh") || test::has_comm(r.out, "sleep"))
        << "the output is complete:\n"
        << r.out;
    EXPECT_FALSE(process_with_arg(marker));
  }
}

TEST_F(Command, CommandThatEndsOnSigtermKeepsItsStatus) {
  auto r =
      test::run({OFFCPU_BIN, "-q", "-f", "1", "--", "/bin/sleep", "30"}, 60);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("ended with SIGTERM"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

TEST_F(Command, UidWithoutPasswdEntryNeedsGroup) {
  uint32_t uid = 15; // the case reported: it ran with gid 15, kmem
  while (getpwuid(uid))
    uid++;
  const std::string flag = dir_ + "/ran";
  auto refused =
      run({}, {"--user", std::to_string(uid)}, {"/usr/bin/touch", flag});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--group"), std::string::npos) << refused.err;
  EXPECT_EQ(access(flag.c_str(), F_OK), -1) << "the command did not run";
  auto ids = run({}, {"--user", std::to_string(uid), "--group", "65534"},
                 {"/bin/sh", "-c", "id -u; id -G; echo $USER $HOME"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out.substr(0, ids.out.find("\n", ids.out.find("\n") + 1)),
            std::to_string(uid) + "\n65534");
  EXPECT_NE(ids.out.find("#" + std::to_string(uid) + " /\n"), std::string::npos)
      << ids.out;
}

TEST_F(Command, HalfSetSudoEnvironmentIsRefused) {
  const std::string flag = dir_ + "/ran";
  const std::string uid = std::to_string(uid_), gid = std::to_string(gid_);
  for (const auto &env : std::vector<std::vector<std::string>>{
           {"SUDO_UID=" + uid},
           {"SUDO_GID=" + gid},
           {"SUDO_UID=" + uid, "SUDO_GID=staff"},
           {"SUDO_UID=nobody", "SUDO_GID=" + gid},
           {"SUDO_UID=4294967295", "SUDO_GID=" + gid}}) {
    std::vector<std::string> full{"-u", "SUDO_UID", "-u", "SUDO_GID"};
    full.insert(full.end(), env.begin(), env.end());
    auto r = run(full, {}, {"/usr/bin/touch", flag});
    SCOPED_TRACE(env.size() == 1 ? env[0] : env[0] + " " + env[1]);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("SUDO_"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n"
                                                               << r.err;
    EXPECT_EQ(access(flag.c_str(), F_OK), -1) << "never run as root";
    unlink(flag.c_str());
  }
}

TEST_F(Command, MissingOrNotExecutableCommandExitsAsAShellWould) {
  const std::string root_only = dir_ + "/root-only";
  {
    std::ofstream f(root_only);
    f << "#!/bin/sh\nexit 0\n";
  }
  chmod(root_only.c_str(), 0700);
  struct Case {
    std::vector<std::string> env, argv;
    int status;
  };
  // A script without #! is run by the shell, as execvp runs it.
  const std::string script = dir_ + "/no-shebang";
  {
    std::ofstream f(script);
    f << "exit 3\n";
  }
  chmod(script.c_str(), 0755);
  auto ran = run(sudo_env(), {}, {script});
  EXPECT_EQ(ran.exit_code, 3) << ran.err;
  const std::vector<Case> cases{{{}, {"/nonexistent"}, 127},
                                {{}, {"/nonexistent/command"}, 127},
                                {{}, {"offcpu-no-such-command-on-path"}, 127},
                                {{}, {"/etc/passwd"}, 126},
                                {{}, {"/tmp"}, 126},
                                // Root may run it, the command's user may not.
                                {sudo_env(), {root_only}, 126}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.argv[0]);
    auto r = run(c.env, {}, c.argv, 30);
    EXPECT_EQ(r.exit_code, c.status) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n"
                                                               << r.err;
    EXPECT_NE(r.err.find(c.argv[0]), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Tracing"), std::string::npos)
        << "refused before tracing starts:\n"
        << r.err;
  }
}

} // namespace
} // namespace offcpu
