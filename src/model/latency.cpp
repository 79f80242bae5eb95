#include "model/latency.h"

#include <algorithm>
#include <cmath>

namespace offcpu {

void Latency::add(const Latency &other) {
  for (size_t b = 0; b < kBuckets; b++)
    buckets[b] += other.buckets[b];
  waits += other.waits;
  max_ns = std::max(max_ns, other.max_ns);
}

Latency Latency::from_buckets(const uint32_t *hist, uint64_t count,
                              uint64_t max_ns) {
  Latency l;
  size_t fullest = 0;
  for (size_t b = 0; b < kBuckets; b++) {
    l.buckets[b] = hist[b];
    l.waits += hist[b];
    if (hist[b] > hist[fullest])
      fullest = b;
  }
  // Only wraps make the buckets fall short of the count, by whole 2^32s,
  // and the bucket that wrapped is all but surely the fullest.
  if (l.waits && count > l.waits &&
      (count - l.waits) % (uint64_t{1} << 32) == 0) {
    l.buckets[fullest] += count - l.waits;
    l.waits = count;
  }
  l.max_ns = max_ns;
  return l;
}

uint64_t Latency::low_ns(size_t b) {
  return b == 0 ? 0 : (uint64_t{1} << b) * 1000;
}

uint64_t Latency::high_ns(size_t b) {
  return b + 1 >= kBuckets ? UINT64_MAX : (uint64_t{1} << (b + 1)) * 1000;
}

uint64_t Latency::quantile_ns(double q) const {
  if (waits == 0)
    return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(waits))));
  uint64_t before = 0;
  for (size_t b = 0; b < kBuckets; b++) {
    const uint64_t n = buckets[b];
    if (before + n < rank) {
      before += n;
      continue;
    }
    // The rank's place among the bucket's waits, spread evenly: at the
    // middle of equal slices of the range, or, in the max's bucket, at
    // their tops, the last being the max itself.
    const double lo = static_cast<double>(low_ns(b));
    const double j = static_cast<double>(rank - before);
    double est;
    if (max_ns >= low_ns(b) && max_ns < high_ns(b))
      est =
          lo + (static_cast<double>(max_ns) - lo) * j / static_cast<double>(n);
    else
      est = lo + (static_cast<double>(high_ns(b)) - lo) * (j - 0.5) /
                     static_cast<double>(n);
    return std::min(max_ns, static_cast<uint64_t>(std::llround(est)));
  }
  return max_ns;
}

} // namespace offcpu
