// offcpu lock's text report: one row per lock (or caller, or thread), its
// waits' count, total, max and average, the kind and the lock's name and
// the caller that waited longest, sorted by total wait, as perf lock
// contention prints it, each row followed by its latency distribution
// (log2 histogram bars); -v adds each row's quantiles and its stacks.
#pragma once

#include <string>

#include "model/layout.h"
#include "model/profile.h"

namespace offcpu {

enum class LockGrouping {
  Lock,   // by (kind, lock): which lock is hot (default)
  Caller, // by (kind, the kernel function that took the lock)
  Thread, // by thread (comm, tid)
  Cgroup, // by the waiter's cgroup (Sample::cgroup)
};

// The function that took the lock: the first kernel frame below the lock's
// own functions (mutex_lock, down_write, schedule...), else the user leaf.
std::string lock_caller(const Sample &s);

std::string render_lock_table(const Profile &profile, LockGrouping by,
                              bool verbose, const LayoutOptions &layout);

} // namespace offcpu
