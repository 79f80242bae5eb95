// The command of `offcpu [options] -- COMMAND ARGS...`: forked before
// tracing starts and held there, then let go to exec once the programs are
// attached, so that it is traced from its first instruction. It starts as
// sudo starts a command: as its user, with that user's HOME, USER, LOGNAME
// and SHELL, and with no file descriptor above 2 unless asked to keep them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "run/run_as.h"

namespace offcpu {

// Exit statuses for a command that cannot be run, as env, timeout and nice
// use them (POSIX's for a shell).
inline constexpr int kExitCannotRun = 126; // found, but not executable
inline constexpr int kExitNotFound = 127;

// How long the command has to end after SIGTERM before it gets SIGKILL.
inline constexpr double kTermGraceSeconds = 2.0;

struct CommandSetup {
  RunAs as;
  bool keep_fds = false; // pass every fd offcpu inherited, not only 0-2
};

// What ending the command took, for the report on stderr.
struct CommandEnd {
  bool signalled = false;     // it was running: it got SIGTERM
  bool killed = false;        // it outlived the grace period: SIGKILL
  int others_killed = 0;      // processes it started, also outliving it
  bool still_running = false; // not gone even after SIGKILL
};

class TracedCommand {
public:
  // Forks; the child becomes its user and waits. Throws FatalError with
  // status 127 when the command is not found and 126 when it cannot be
  // run (not executable, not a regular file, or not by its user), before
  // anything is traced.
  TracedCommand(const std::vector<std::string> &argv,
                const CommandSetup &setup);
  ~TracedCommand(); // a child never released is killed
  TracedCommand(const TracedCommand &) = delete;
  TracedCommand &operator=(const TracedCommand &) = delete;

  pid_t pid() const { return pid_; }
  // The file it execs (found on PATH as execvp finds it).
  const std::string &path() const { return path_; }
  // Lets the child exec.
  void release();
  // Reaps the child if it has ended; true once it has.
  bool exited();
  // Ends a command still running, as timeout(1) does: SIGTERM to it and to
  // the processes it started, SIGKILL to those still there after `grace`.
  CommandEnd end(double grace_s = kTermGraceSeconds);
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
  std::string path_;
};

// The traced command's end, once the output is written: a command still
// running is ended as timeout(1) ends it (see TracedCommand::end), what
// that took said on stderr. Returns its status, offcpu's exit status.
int finish_command(TracedCommand &cmd);

} // namespace offcpu
