// Privileges: whether offcpu may load and attach BPF programs, and what a
// process it starts as root gives up before it execs (root's ids and
// groups, root's open files), as sudo does.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace offcpu {

// Throws FatalError naming what is missing (root, or CAP_BPF+CAP_PERFMON).
void require_bpf_privileges();

// Raises the soft limit on open descriptors towards the hard limit (at most
// 65,536). offcpu keeps descriptors of files other users' processes map,
// so that it can name their frames after the processes exit; each kind is
// bounded (symbolize/symbolizer.cpp), but together, with the per-CPU ring
// buffers of a large host, they can pass the 1,024 a process gets by
// default. The command a TracedCommand starts gets the limit back.
void raise_fd_limit();

// The following are for a child between fork and exec: system calls only,
// no allocation (async-signal-safe).

// The soft limit on descriptors as it was before raise_fd_limit.
void restore_fd_limit();

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
