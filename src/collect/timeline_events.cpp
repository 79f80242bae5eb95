#include "collect/timeline_events.h"

#include <algorithm>
#include <cstring>

namespace offcpu {
namespace {

int on_event(void *ctx, void *data, size_t size) {
  if (size >= sizeof(offcpu_event)) {
    offcpu_event e;
    std::memcpy(&e, data, sizeof(e));
    static_cast<EventReader *>(ctx)->add(e);
  }
  return 0;
}

} // namespace

uint32_t timeline_ring_bytes(uint32_t events_memory_mib) {
  uint64_t want = (uint64_t{events_memory_mib} << 20) / 16;
  uint64_t bytes = 1u << 20;
  while (bytes < want && bytes < (256u << 20))
    bytes <<= 1;
  return static_cast<uint32_t>(bytes);
}

EventReader::EventReader(int ring_fd, uint64_t max_bytes)
    : max_events_(std::max<uint64_t>(1, max_bytes / sizeof(offcpu_event))) {
  if (ring_fd >= 0)
    ring_.reset(ring_buffer__new(ring_fd, on_event, this, nullptr));
}

void EventReader::consume() {
  if (ring_)
    ring_buffer__consume(ring_.get());
}

void EventReader::add(const offcpu_event &e) {
  if (store_.events.size() >= max_events_) {
    store_.dropped++;
    store_.dropped_ns += e.duration_ns;
    return;
  }
  store_.events.push_back(e);
}

} // namespace offcpu
