// The one place that decides how a sample's frames line up, root first:
//   cgroup (--per-cgroup); thread; the state it waited in ([D],
//   --show-state); [Missed User Stack] or user frames; delimiter (-d, when
//   both parts exist); [Missed Kernel Stack] or kernel frames; for a lock
//   wait, its side (write/read) and the lock; then, with --wakers, "--" and
//   the waker's part leaf first, its comm last (BCC offwaketime's layout).
// Every format (folded, text, SVG, pprof) draws this sequence; a new part
// of a sample is added here once.
#pragma once

#include <deque>
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

// A sample as the stacks a flame graph draws: itself, or with --runqueue
// its blocked part and its run-queue part, the latter with its own
// [runqueue] leaf frame (before the waker's part); totals unchanged. The
// frames by reference: the sample's own where they are, the others (the
// thread, markers, the waker's) held by the LaidOutParts. A whole-system
// run's folded output copied every frame of every sample.
struct LaidOutPart {
  std::vector<const Frame *> frames;
  uint64_t ns = 0;
};
struct LaidOutParts {
  LaidOutParts() = default;
  // Moved only: a copy's parts would point into the original's frames.
  LaidOutParts(const LaidOutParts &) = delete;
  LaidOutParts &operator=(const LaidOutParts &) = delete;
  LaidOutParts(LaidOutParts &&) = default;
  LaidOutParts &operator=(LaidOutParts &&) = default;

  std::deque<Frame> own; // stable addresses, as frames point into it
  std::vector<LaidOutPart> parts;
  std::vector<LaidOutPart>::const_iterator begin() const {
    return parts.begin();
  }
  std::vector<LaidOutPart>::const_iterator end() const { return parts.end(); }
};
LaidOutParts lay_out_parts(const Sample &s, const LayoutOptions &opts);

// The name a waker kind is shown as where it has no frames of its own.
const char *waker_marker(Waker::Kind kind);

// --holders: whether the sample shows the owner its lock recorded at the
// wait's begin ("[owner COMM]" last; pprof's owner labels): where there is
// one and it is not the task that woke the waiter.
bool shows_lock_owner(const Sample &s);

} // namespace offcpu
