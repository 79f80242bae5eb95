// The timeline from the events the BPF side sent: every wait named, and
// its wake chain linked.
#pragma once

#include <cstdint>

#include "collect/raw_profile.h"
#include "collect/timeline_events.h"
#include "model/timeline.h"
#include "symbolize/symbolizer.h"

namespace offcpu {

struct TimelineSetup {
  uint32_t chain_depth = 3;
  uint64_t events_min_ns = 0;
  uint64_t window_start_ns = 0, window_end_ns = 0;
  int64_t realtime_offset_ns = 0;
};

// `raw` holds the stacks and wakers the events refer to
// (OffcpuSession::take_events).
Timeline build_timeline(const RawTimeline &events, const RawProfile &raw,
                        Symbolizer &sym, const TimelineSetup &setup);

// The wake chain's links, on their own (tests): for each event, the index
// of the waker's own event that ended last before the wakeup, or -1.
// Events sorted by start time.
struct ChainLink {
  uint32_t waker_tid;
  uint64_t woken_at_ns;
};
long find_waker_event(const std::vector<offcpu_event> &by_start,
                      const ChainLink &link);

} // namespace offcpu
