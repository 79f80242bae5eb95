// The path a process was run by, where the kernel shows another: a binary
// run through a symlink is mapped (and shown in /proc/PID/maps and exe) as
// the symlink's target, so Debian's redis-server, a symlink to
// redis-check-rdb, would be named [redis-check-rdb]. execve's own filename
// (the AT_EXECFN string) is what the user ran and what comm was made from.
#pragma once

#include <string>

#include "util/fs.h"

namespace offcpu {

struct ExecPath {
  std::string mapped; // the executable's path as /proc/PID/maps shows it
  std::string run;    // the path it was run by; empty: the same as mapped

  // The name to show for a mapping's path.
  const std::string &name_for(const std::string &maps_path) const {
    return !run.empty() && maps_path == mapped ? run : maps_path;
  }
};

// Reads /proc/PID/exe and comm; where comm is not the exe's name (run by
// another name), AT_EXECFN (auxv, then at most 4 KiB of the process's
// memory), and keeps the path run only if it leads, inside the process's
// root (`root_fd`), to the very file exe is: the string is the process's
// to change. Costs a readlink and a read of comm per process, and for the
// few run by another name two small reads and one confined path walk.
ExecPath exec_path_of(const FileReader &files, const std::string &pid_dir,
                      int root_fd);

} // namespace offcpu
