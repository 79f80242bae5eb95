// Where an -o path really leads, found without following anything another
// user could have put on the way. offcpu runs as root: a user who owns a
// symlink (or a directory it sits in) could point root's report at a disk
// or at a file in /etc, and fs.protected_symlinks does not help inside
// user-owned directories (nor anywhere when it is 0).
//
// The path is walked one component at a time with openat(O_PATH |
// O_NOFOLLOW), each directory kept open, so nothing is looked up twice:
// - a symlink is followed only if root owns it and it sits in a directory
//   only root can write (owned by root, not writable by group or others),
//   sticky or not;
// - `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`: offcpu's own descriptor N,
//   written in place (what root's shell opened);
// - what the path ends in: nothing yet or a regular file (written by the
//   caller under a temporary name in `dir` and renamed over `name`); or,
//   written in place: /dev/null, a terminal, a FIFO owned by root. Block
//   devices, other character devices, sockets and directories are refused.
#pragma once

#include <string>

#include "util/fd.h"

namespace offcpu {

struct ResolvedOutput {
  // Open for writing when the target is written in place (pipe, terminal,
  // /dev/null, one of our own descriptors); then dir and name are unset.
  UniqueFd in_place;
  UniqueFd dir;         // O_PATH directory that holds (or will hold) name
  std::string name;     // the last component, a regular file or missing
  std::string dir_path; // dir as a path, for messages
};

// Throws FatalError (exit 1) with a one-line "cannot write PATH: why" when
// the path is refused or cannot be reached.
ResolvedOutput resolve_output_path(const std::string &path);

} // namespace offcpu
