// The timeline's events (include/offcpu/timeline.h) as the BPF programs
// send them, kept in user space up to a memory cap, and the ring buffer
// they come through.
#pragma once

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "offcpu/timeline.h"

namespace offcpu {

// The ring buffer's size for --events-memory MIB: a sixteenth of what user
// space may hold, a power of two between 1 MiB and 256 MiB. At 136 bytes an
// event in the ring, 8 MiB (the default) holds 60,000 events: 600 ms of
// 100,000 events a second, twelve times the 50 ms between two reads.
uint32_t timeline_ring_bytes(uint32_t events_memory_mib);

struct RawTimeline {
  std::vector<offcpu_event> events;
  // Dropped in user space: the store was at its cap (--events-memory).
  uint64_t dropped = 0;
  uint64_t dropped_ns = 0;
};

// Reads the events ring into a store of at most `max_bytes` of events.
class EventReader {
public:
  EventReader(int ring_fd, uint64_t max_bytes);
  // Everything the ring holds now; the programs do not wake user space for
  // events (a wakeup per event would cost more than the event), so the
  // polling loop calls this after each poll, and once after stop.
  void consume();
  RawTimeline take() { return std::move(store_); }
  // For the ring's C callback.
  void add(const offcpu_event &e);

private:
  struct RingDeleter {
    void operator()(ring_buffer *r) const { ring_buffer__free(r); }
  };
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  size_t max_events_;
  RawTimeline store_;
};

} // namespace offcpu
