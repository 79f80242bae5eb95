#include "model/latency.h"

#include <algorithm>
#include <cmath>

namespace offcpu {

void Latency::add_to_bucket(size_t b, uint64_t n) {
  if (n == 0 || b >= kBuckets)
    return;
  if (lo_ == hi_) {
    lo_ = static_cast<uint8_t>(b);
    hi_ = static_cast<uint8_t>(b + 1);
    one_ = n;
    return;
  }
  if (b >= lo_ && b < hi_) {
    (hi_ - lo_ == 1 ? one_ : many_[b - lo_]) += n;
    return;
  }
  const size_t lo = std::min<size_t>(lo_, b), hi = std::max<size_t>(hi_, b + 1);
  std::vector<uint64_t> wider(hi - lo);
  for (size_t i = lo_; i < hi_; i++)
    wider[i - lo] = bucket(i);
  wider[b - lo] += n;
  many_ = std::move(wider);
  one_ = 0;
  lo_ = static_cast<uint8_t>(lo);
  hi_ = static_cast<uint8_t>(hi);
}

void Latency::add(const Latency &other) {
  for (size_t b = other.lo_; b < other.hi_; b++)
    add_to_bucket(b, other.bucket(b));
  waits += other.waits;
  max_ns = std::max(max_ns, other.max_ns);
}

Latency Latency::from_buckets(const uint32_t *hist, uint64_t count,
                              uint64_t max_ns) {
  Latency l;
  size_t fullest = 0, first = kBuckets, last = 0;
  for (size_t b = 0; b < kBuckets; b++) {
    l.waits += hist[b];
    if (hist[b] > hist[fullest])
      fullest = b;
    if (hist[b]) {
      first = std::min(first, b);
      last = b;
    }
  }
  l.max_ns = max_ns;
  if (first == kBuckets)
    return l;
  // Only wraps make the buckets fall short of the count, by whole 2^32s,
  // and the bucket that wrapped is all but surely the fullest.
  uint64_t wrapped = 0;
  if (count > l.waits && (count - l.waits) % (uint64_t{1} << 32) == 0) {
    wrapped = count - l.waits;
    l.waits = count;
  }
  l.lo_ = static_cast<uint8_t>(first);
  l.hi_ = static_cast<uint8_t>(last + 1);
  if (first == last) {
    l.one_ = uint64_t{hist[first]} + wrapped;
  } else {
    l.many_.assign(hist + first, hist + last + 1);
    l.many_[fullest - first] += wrapped;
  }
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
    const uint64_t n = bucket(b);
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
