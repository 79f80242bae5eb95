// Opening files that other users control, as root, without being tricked
// into reading something else: a perf map that is a symlink to a root-only
// file, a path that leaves a container's root, a FIFO that never answers, a
// device that has side effects when opened.
//
// Every file is first opened with O_PATH (no read access, no side effects
// for devices or FIFOs), checked with fstat (regular file, owner, who could
// read it, size), and only then reopened for reading.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "util/fd.h"

namespace offcpu {

// The credentials of the process a file is read for: offcpu only reads a
// file on a process's behalf if that process's user could read it too.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
};

struct FilePolicy {
  // Follow a symlink in the last component (still inside the root). Off for
  // files whose names a user chooses (perf maps): there a symlink is refused.
  bool follow_last_symlink = false;
  // Refuse files larger than this.
  uint64_t max_size = uint64_t{1} << 30;
  // The file must be owned by this user, or by root (perf maps, as perf
  // itself requires).
  std::optional<uid_t> owner;
  // The file must be readable by this user (its mode bits, primary group).
  std::optional<Credentials> reader;
};

// Why a file was not opened; stats count them.
enum class OpenFailure {
  None,
  Missing,    // no such file, or not reachable
  Symlink,    // last component is a symlink and the policy refuses them
  NotRegular, // a directory, FIFO, socket or device
  Owner,      // owned by someone other than the policy allows
  Permission, // the process's user could not read it
  TooLarge,   // over the policy's size limit
  Error,      // anything else (I/O error, resources)
};
const char *open_failure_name(OpenFailure f);

struct CheckedFile {
  UniqueFd fd; // open for reading; invalid on failure
  struct stat st {};
  OpenFailure failure = OpenFailure::None;
  explicit operator bool() const { return static_cast<bool>(fd); }
};

// A directory to resolve paths in, as O_PATH: a process's root
// (/proc/PID/root, followed on purpose: it is how the kernel hands us the
// process's view of the file system), or a trusted directory of ours.
UniqueFd open_root_dir(const std::string &dir);

// Opens `path` as if `root_fd` were "/": absolute symlinks and ".." never
// leave the root, magic links (/proc/PID/fd/N) are refused. Uses openat2
// (5.6+) and, where it is missing or refuses, a component-by-component walk
// that applies the same rules.
CheckedFile open_in_root(int root_fd, const std::string &path,
                         const FilePolicy &policy);

// The same confinement without the kernel's help, always: for kernels before
// 5.6 and for tests of that path.
CheckedFile open_in_root_by_walk(int root_fd, const std::string &path,
                                 const FilePolicy &policy);

// A path whose every component we trust (/proc/PID/maps, our own debug
// directories, /proc/PID/map_files/... whose last link the kernel resolves
// to the mapped file): the same type, owner, permission and size checks,
// symlinks followed.
CheckedFile open_checked(const std::string &path, const FilePolicy &policy);

// Reads up to `max_bytes` from the start of `fd` with pread (never mmap: a
// file truncated by its owner while we read it must not raise SIGBUS).
std::optional<std::string> read_fd(int fd, std::size_t max_bytes);

} // namespace offcpu
