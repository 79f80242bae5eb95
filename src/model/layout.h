// The one place that decides how a sample's frames line up, root first:
//   thread; [Missed User Stack] or user frames; delimiter (-d, when both
//   parts exist); [Missed Kernel Stack] or kernel frames; for a lock wait,
//   its side (write/read) and the lock.
// Every format (folded, text, SVG, pprof) draws this sequence; a new part
// of a sample (a waker stack, a run-queue leaf) is added here once.
#pragma once

#include <string>
#include <vector>

#include "model/profile.h"

namespace offcpu {

// What the thread frame says, as stackcollapse-perf.pl --pid/--tid name
// it: threads of one comm merge ("comm"), stay apart by process
// ("comm-PID") or by thread ("comm-PID/TID").
enum class ThreadFrame { Comm, Process, Thread };

struct LayoutOptions {
  bool delimited = false; // a Delimiter frame between user and kernel
  ThreadFrame thread = ThreadFrame::Comm;
};

std::string thread_frame_name(const Sample &s, ThreadFrame how);

std::vector<Frame> lay_out(const Sample &s, const LayoutOptions &opts);

} // namespace offcpu
