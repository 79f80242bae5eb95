// Who the command after -- runs as (--user, --group, SUDO_UID/SUDO_GID),
// the environment it gets, and the fds it gives up: the rules without a
// fork. The real runs are in tests/integration/command_test.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "cli/options.h"
#include "run/run_as.h"
#include "util/error.h"
#include "util/privileges.h"

namespace offcpu {
namespace {

// A uid that no passwd entry names, from the top of the range down.
uint32_t unnamed_uid() {
  for (uint32_t id = 4000000000u;; id--)
    if (!getpwuid(id))
      return id;
}

std::string refusal(const RunAsRequest &r) {
  try {
    resolve_run_as(r);
  } catch (const FatalError &e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(RunAs, NumericIdsAreDigitsBelowTheUnchangedValue) {
  uint32_t id = 7;
  EXPECT_TRUE(parse_numeric_id("0", id));
  EXPECT_EQ(id, 0u);
  EXPECT_TRUE(parse_numeric_id("4294967294", id));
  EXPECT_EQ(id, 4294967294u);
  // (uid_t)-1 means "leave unchanged" to setresuid: as an id it would keep
  // root. Wider numbers would wrap to root's 0.
  for (const char *bad : {"4294967295", "4294967296", "18446744073709551616",
                          "-1", "+1", " 1", "1 ", "1a", "0x10", ""})
    EXPECT_FALSE(parse_numeric_id(bad, id)) << "'" << bad << "'";
  EXPECT_FALSE(parse_numeric_id(nullptr, id));
}

TEST(RunAs, UserByNameOrUidTakesItsPasswdEntry) {
  for (const char *user : {"root", "0"}) {
    RunAsRequest r;
    r.user = user;
    r.self_uid = 1234;
    RunAs as = resolve_run_as(r);
    EXPECT_EQ(as.uid, 0u);
    EXPECT_EQ(as.gid, 0u);
    EXPECT_EQ(as.name, "root");
    EXPECT_EQ(as.home, getpwuid(0)->pw_dir);
    EXPECT_NE(std::find(as.groups.begin(), as.groups.end(), 0u),
              as.groups.end());
  }
  RunAsRequest r;
  r.user = "no-such-user-offcpu";
  EXPECT_NE(refusal(r).find("no such user"), std::string::npos);
}

TEST(RunAs, UidWithoutPasswdEntryNeedsGroup) {
  const uint32_t uid = unnamed_uid();
  RunAsRequest r;
  r.user = std::to_string(uid);
  // It used to run with a gid equal to the uid: 15 is kmem.
  EXPECT_NE(refusal(r).find("--group"), std::string::npos);
  r.group = "65534";
  RunAs as = resolve_run_as(r);
  EXPECT_EQ(as.uid, uid);
  EXPECT_EQ(as.gid, 65534u);
  EXPECT_EQ(as.groups, std::vector<gid_t>{65534u});
  EXPECT_EQ(as.name, "#" + std::to_string(uid)); // as sudo names it
  EXPECT_EQ(as.home, "/");
  r.group = "no-such-group-offcpu";
  EXPECT_NE(refusal(r).find("no such group"), std::string::npos);
}

TEST(RunAs, GroupOverridesTheUsersOwn) {
  RunAsRequest r;
  r.user = "root";
  r.group = "65534";
  RunAs as = resolve_run_as(r);
  EXPECT_EQ(as.uid, 0u);
  EXPECT_EQ(as.gid, 65534u);
  EXPECT_EQ(as.groups.front(), 65534u);
}

TEST(RunAs, SudoIdsAreUsedOnlyWhenBothAreValid) {
  RunAsRequest r;
  r.self_uid = 0;
  r.sudo_uid = "65534";
  r.sudo_gid = "65534";
  RunAs as = resolve_run_as(r);
  EXPECT_EQ(as.uid, 65534u);
  EXPECT_EQ(as.gid, 65534u);

  r.sudo_gid = nullptr;
  EXPECT_NE(refusal(r).find("SUDO_UID is set but SUDO_GID is not"),
            std::string::npos);
  r.sudo_uid = nullptr;
  r.sudo_gid = "65534";
  EXPECT_NE(refusal(r).find("SUDO_GID is set but SUDO_UID is not"),
            std::string::npos);
  for (const char *bad : {"", "abc", "-1", "4294967295", "65534x"}) {
    r.sudo_uid = bad;
    r.sudo_gid = "65534";
    EXPECT_NE(refusal(r).find("is not a user id"), std::string::npos) << bad;
    r.sudo_uid = "65534";
    r.sudo_gid = bad;
    EXPECT_NE(refusal(r).find("is not a group id"), std::string::npos) << bad;
  }
  // --user says it all: SUDO_* are not consulted.
  r.sudo_uid = "65534";
  r.sudo_gid = nullptr;
  r.user = "root";
  EXPECT_EQ(resolve_run_as(r).uid, 0u);
}

TEST(RunAs, WithoutSudoOrUserItIsOffcpusOwnUser) {
  RunAsRequest r;
  r.self_uid = 0;
  r.self_gid = 0;
  RunAs as = resolve_run_as(r);
  EXPECT_EQ(as.uid, 0u);
  EXPECT_EQ(as.name, "root");
}

TEST(RunAs, EnvironmentNamesTheTargetUserAndKeepsTheRest) {
  RunAs as;
  as.name = "alice";
  as.home = "/home/alice";
  as.shell = "/bin/zsh";
  const char *env[] = {
      "HOME=/root",      "PATH=/usr/bin:/bin", "USER=root",  "LOGNAME=root",
      "SHELL=/bin/bash", "HOMEPAGE=x",         "TERM=xterm", nullptr};
  std::vector<std::string> out = command_environment(as, env);
  std::vector<std::string> want{"PATH=/usr/bin:/bin", "HOMEPAGE=x",
                                "TERM=xterm",         "HOME=/home/alice",
                                "USER=alice",         "LOGNAME=alice",
                                "SHELL=/bin/zsh"};
  EXPECT_EQ(out, want);
}

TEST(RunAs, CommandOptionsNeedACommand) {
  auto exists = [](uint32_t) { return true; };
  const char *with[] = {"offcpu", "--user",     "root", "--group",
                        "0",      "--keep-fds", "--",   "/bin/true"};
  CommandLine cl = parse_command_line(8, with, exists);
  EXPECT_EQ(cl.profile.user, "root");
  EXPECT_EQ(cl.profile.group, "0");
  EXPECT_TRUE(cl.profile.keep_fds);
  for (const char *opt : {"--group", "--keep-fds", "--user"}) {
    std::vector<const char *> argv{"offcpu", opt};
    if (std::string(opt) != "--keep-fds")
      argv.push_back("0");
    argv.push_back("1");
    try {
      parse_command_line(static_cast<int>(argv.size()), argv.data(), exists);
      ADD_FAILURE() << opt << " without a command was accepted";
    } catch (const FatalError &e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(opt) + " is for the command given after --");
    }
  }
}

TEST(ExecFds, ListedFdsAreMarkedCloseOnExec) {
  int p[2];
  ASSERT_EQ(pipe(p), 0); // no O_CLOEXEC: as a parent would pass them
  const int high = fcntl(p[0], F_DUPFD, 200);
  ASSERT_GE(high, 200);
  ASSERT_TRUE(close_listed_fds_on_exec(high));
  EXPECT_EQ(fcntl(high, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(fcntl(p[1], F_GETFD) & FD_CLOEXEC, 0) << "below `from`: kept";
  close(high);
  const int again = fcntl(p[0], F_DUPFD, 200);
  close_fds_on_exec(again);
  EXPECT_EQ(fcntl(again, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  for (int fd : {again, p[0], p[1]})
    close(fd);
}

} // namespace
} // namespace offcpu
