// The two clocks offcpu reads.
#pragma once

#include <time.h>

#include <cstdint>

namespace offcpu {

// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(), so user space and
// the BPF programs agree on when a window opens and closes.
inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Wall clock, ns since the epoch (pprof's time_nanos).
inline int64_t wall_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace offcpu
