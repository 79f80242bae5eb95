// A latency distribution: how long the waits of a stack lasted, as the BPF
// side counts them (a log2 histogram in microseconds and the longest wait,
// see OFFCPU_HIST_BUCKETS), merged as stacks are merged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace offcpu {

struct Latency {
  // Bucket 0: under 2 us; bucket i: [2^i, 2^(i+1)) us; the last: 2^31 us
  // and up. The same as OFFCPU_HIST_BUCKETS (checked where both are seen).
  static constexpr size_t kBuckets = 32;

  uint64_t waits = 0; // the waits in the buckets
  uint64_t max_ns = 0;

  bool empty() const { return waits == 0; }
  // The waits in bucket b (0 outside the stored range).
  uint64_t bucket(size_t b) const {
    if (b < lo_ || b >= hi_)
      return 0;
    return hi_ - lo_ == 1 ? one_ : many_[b - lo_];
  }
  // Adds n waits to bucket b's count (`waits` is the caller's to keep).
  void add_to_bucket(size_t b, uint64_t n);
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

private:
  // Only the buckets from the first to the last that has waits, and a
  // single one inline: most stacks of a whole-system run have one or a few
  // waits, and 32 buckets each were 256 of a sample's 700 bytes, held by
  // every sample to the end of the run (issue #27).
  uint8_t lo_ = 0, hi_ = 0; // [lo_, hi_)
  uint64_t one_ = 0;        // bucket lo_ when it is the only one
  std::vector<uint64_t> many_;
};

} // namespace offcpu
