// A latency distribution: how long the waits of a stack lasted, as the BPF
// side counts them (a log2 histogram in microseconds and the longest wait,
// see OFFCPU_HIST_BUCKETS), merged as stacks are merged.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace offcpu {

struct Latency {
  // Bucket 0: under 2 us; bucket i: [2^i, 2^(i+1)) us; the last: 2^31 us
  // and up. The same as OFFCPU_HIST_BUCKETS (checked where both are seen).
  static constexpr size_t kBuckets = 32;

  std::array<uint64_t, kBuckets> buckets{};
  uint64_t waits = 0; // the waits in the buckets
  uint64_t max_ns = 0;

  bool empty() const { return waits == 0; }
  // Both distributions' waits: bucket by bucket, the larger max.
  void add(const Latency &other);
  // From 32-bit BPF buckets of `count` waits: a bucket that wrapped (2^32
  // waits of one thread's key) has its lost multiples of 2^32 back.
  static Latency from_buckets(const uint32_t *hist, uint64_t count,
                              uint64_t max_ns);

  // Bucket b's range in nanoseconds, [low, high); the last bucket's high
  // is UINT64_MAX.
  static uint64_t low_ns(size_t b);
  static uint64_t high_ns(size_t b);

  // The q-quantile (0 < q <= 1) of the waits, nearest rank, estimated at
  // bucket resolution: the rank's bucket is exact; within it the waits are
  // taken as evenly spread over the bucket's range (linear interpolation,
  // as Prometheus' histogram_quantile), and in the bucket of the max as
  // ending at the max. Never above the max. 0 when empty.
  uint64_t quantile_ns(double q) const;
};

} // namespace offcpu
