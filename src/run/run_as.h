// Who the command of `offcpu -- COMMAND` runs as, and the environment it
// gets, decided as sudo decides them: from --user/--group, else from the
// SUDO_UID/SUDO_GID that sudo set, else offcpu's own user. All lookups are
// done here, in offcpu, so that the forked child only makes system calls.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace offcpu {

struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups; // supplementary groups, gid included
  // From the passwd entry; for a uid without one (only with --group), as
  // sudo makes them up: "#UID", "/" and "/bin/sh".
  std::string name, home, shell;
};

// What identifies the user: the options and the variables sudo sets
// (nullptr: unset). Kept apart from getenv so that the rules are tested.
struct RunAsRequest {
  std::string user;  // --user NAME|UID, "" if not given
  std::string group; // --group NAME|GID, "" if not given
  const char *sudo_uid = nullptr;
  const char *sudo_gid = nullptr;
  uid_t self_uid = 0; // offcpu's own, when sudo did not run it
  gid_t self_gid = 0;
};

// Throws FatalError (usage) when the user or group is unknown, when a
// --user UID has no passwd entry and no --group says its group, and when
// SUDO_UID/SUDO_GID are not both set to valid ids (one alone, or text).
RunAs resolve_run_as(const RunAsRequest &request);

// The request from the options and this process's environment.
RunAs command_user(const std::string &user, const std::string &group);

// A uid or gid in decimal, as the kernel takes it: digits only, below
// 2^32 - 1 (which means "unchanged" to setresuid). False otherwise.
bool parse_numeric_id(const char *text, uint32_t &id);

// `env` with HOME, USER, LOGNAME and SHELL set for `as`, as sudo's
// env_reset sets them; every other variable kept as it is.
std::vector<std::string> command_environment(const RunAs &as,
                                             const char *const *env);

} // namespace offcpu
