// The command of `offcpu [options] -- COMMAND ARGS...`: forked before
// tracing starts and held there, then let go to exec once the programs are
// attached, so that it is traced from its first instruction.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace offcpu {

struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name; // for the supplementary groups; empty: none
};

// Who the command runs as: --user, else the user who ran sudo (SUDO_UID,
// SUDO_GID), else offcpu's own user. Throws FatalError (usage) for an
// unknown --user.
RunAs command_user(const std::string &user_option);

class TracedCommand {
public:
  // Forks; the child waits. Throws FatalError (usage) when the command
  // cannot be found, before anything is started.
  TracedCommand(const std::vector<std::string> &argv, const RunAs &as);
  ~TracedCommand(); // a child never released is killed
  TracedCommand(const TracedCommand &) = delete;
  TracedCommand &operator=(const TracedCommand &) = delete;

  pid_t pid() const { return pid_; }
  // Lets the child drop to its user and exec.
  void release();
  // Reaps the child if it has ended; true once it has.
  bool exited();
  // Asks it to end (the duration is over), as timeout(1) does.
  void terminate();
  // As a shell reports it: the exit code, or 128 + the signal.
  int status() const { return status_; }
  // Why exec failed, if it did ("" otherwise); known once exited.
  const std::string &exec_error() const { return exec_error_; }

private:
  pid_t pid_ = -1;
  int go_fd_ = -1;    // written by release()
  int error_fd_ = -1; // exec's errno, if exec fails
  bool reaped_ = false;
  int status_ = 0;
  std::string exec_error_;
  std::string name_;
};

} // namespace offcpu
