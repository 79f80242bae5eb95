// The timeline of long waits: each wait at least --events-min long with its
// times, stacks, waker and wake chain, named. symbolize/ builds it from the
// events the BPF side sent; output/ writes it as trace-event JSON, as
// Perfetto's protobuf, or as the --top-waits text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"

namespace offcpu {

// A wait's stacks, named once and shared by every wait, waker and hop on
// them (Timeline::stacks): a long run holds hundreds of thousands of waits
// on a few thousand distinct stacks.
struct TimelineStack {
  std::vector<Frame> user, kernel; // root first
  bool user_missed = false, kernel_missed = false;
};

// Who ended a wait, with its stacks by reference (Waker without frames).
struct TimelineWaker {
  Waker::Kind kind = Waker::Kind::Unseen;
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint32_t stack = 0; // index into Timeline::stacks; 0 is empty
};

// One hop of a wake chain: the wait the waker had itself just come out of
// when it woke the next thread down the chain.
struct TimelineHop {
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint64_t start_ns = 0; // CLOCK_MONOTONIC
  uint64_t duration_ns = 0;
  char state = 0;      // R, S, D, I or T
  uint32_t stack = 0;  // index into Timeline::stacks
  TimelineWaker waker; // who ended it, or how it ended
};

struct TimelineWait {
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint64_t start_ns = 0; // CLOCK_MONOTONIC, when it went off CPU
  uint64_t duration_ns = 0;
  uint64_t runq_ns = 0; // of which runnable after the wakeup
  char state = 0;
  uint32_t stack = 0; // index into Timeline::stacks
  TimelineWaker waker;
  std::vector<TimelineHop> chain; // nearest hop first
};

struct Timeline {
  // Every distinct stack pair once; [0] is the empty one.
  std::vector<TimelineStack> stacks{TimelineStack{}};
  std::vector<TimelineWait> waits; // by start time
  // Process names (their main thread's comm at the end), by tgid.
  std::vector<std::pair<uint32_t, std::string>> processes;
  uint64_t window_start_ns = 0, window_end_ns = 0; // CLOCK_MONOTONIC
  // CLOCK_REALTIME - CLOCK_MONOTONIC, ns: wall-clock time of a timestamp.
  int64_t realtime_offset_ns = 0;
  uint64_t events_min_ns = 0;
  // Events lost: the kernel's ring was full (user space fell behind), or
  // offcpu's store was at --events-memory. Their time is in the aggregates.
  uint64_t lost_ring = 0, lost_ring_ns = 0;
  uint64_t lost_store = 0, lost_store_ns = 0;

  const TimelineStack &stack(uint32_t i) const {
    return i < stacks.size() ? stacks[i] : stacks[0];
  }
};

// A wait's name on a timeline: the innermost named user function, else the
// kernel's blocking function (the innermost kernel frame below the
// scheduler's own), else the thread's name.
std::string wait_name(const TimelineStack &stack, const std::string &comm);

// Frames root first, ';'-joined as in folded output.
std::string joined_frames(const std::vector<Frame> &frames);
// User then kernel frames, root first, as one ';'-joined stack.
std::string joined_stack(const TimelineStack &stack);

// A waker as one word: "comm-TID", or its mark ("[timer]"...).
std::string waker_label(const TimelineWaker &w);

} // namespace offcpu
