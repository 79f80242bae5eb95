// How many walks each queued process made without its unwind tables, read
// from the walker's uw_asked map (struct uw_demand) for the order of the
// tables' queue (Unwinder::order_by_demand). Read every 20 ms: the cost must
// not grow with the queue (a host starting 1,000 processes queued 1,000).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace offcpu {

struct DemandReading {
  // Walks without tables by process, for the queued ones the map holds.
  std::unordered_map<uint32_t, uint64_t> walks;
  uint64_t syscalls = 0; // bpf() calls the reading took
};

// A short queue is read one lookup per process; a longer one with batch
// lookups of the whole map (one call per kDemandBatch entries: at most 16
// for the map's 8,192), or, on kernels without batch lookups (before 5.6),
// per process for the first kDemandDirect of the queue only: the head is
// what is served next.
constexpr size_t kDemandDirect = 16;
constexpr uint32_t kDemandBatch = 512;
DemandReading read_demand(int asked_fd, const std::deque<uint32_t> &queue);

} // namespace offcpu
