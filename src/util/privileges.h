// Privileges: whether offcpu may load and attach BPF programs, and what a
// process it starts as root gives up before it execs (root's ids and
// groups, root's open files), as sudo does.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace offcpu {

// Throws FatalError naming what is missing (root, or CAP_BPF+CAP_PERFMON).
void require_bpf_privileges();

// The following are for a child between fork and exec: system calls only,
// no allocation (async-signal-safe).

// Becomes uid/gid with exactly these supplementary groups, in the order
// that works (groups and gid while still root). False, errno set, if any
// step failed; then the process must not exec.
bool drop_privileges(uid_t uid, gid_t gid, const gid_t *groups,
                     size_t group_count);

// Marks every descriptor >= `from` close-on-exec, so that exec closes them
// all while the child may still use its own until then: close_range where
// the kernel has it (5.11), else the listing of /proc/self/fd, else every
// number below RLIMIT_NOFILE.
void close_fds_on_exec(int from);
// The /proc/self/fd walk alone; false when /proc cannot be read.
bool close_listed_fds_on_exec(int from);

} // namespace offcpu
