// The latency distribution per stack: the log2 buckets the BPF side fills,
// the quantiles estimated from them, and how each output shows them.
#include <gtest/gtest.h>

#include "model/latency.h"
#include "offcpu/shared.h"
#include "output/flamegraph.h"
#include "output/pprof.h"
#include "output/text.h"
#include "support/model_builder.h"

namespace offcpu {
namespace {

constexpr uint64_t kUs = 1000, kMs = 1000000;

// `n` waits of each length in `lengths_ns`, bucketed as the BPF side does.
Latency of(const std::vector<std::pair<uint64_t, uint64_t>> &lengths_ns) {
  Latency l;
  for (const auto &[ns, n] : lengths_ns) {
    l.add_to_bucket(offcpu_hist_bucket(ns), n);
    l.waits += n;
    l.max_ns = std::max(l.max_ns, ns);
  }
  return l;
}

TEST(LatencyBuckets, Log2OfMicrosecondsFromOneMicrosecondToOverAnHour) {
  EXPECT_EQ(offcpu_hist_bucket(0), 0u);
  EXPECT_EQ(offcpu_hist_bucket(1999), 0u); // 1 us: under 2 us
  EXPECT_EQ(offcpu_hist_bucket(2000), 1u);
  EXPECT_EQ(offcpu_hist_bucket(1023999), 9u);
  EXPECT_EQ(offcpu_hist_bucket(1024000), 10u);
  EXPECT_EQ(offcpu_hist_bucket(1500 * kUs), 10u);
  EXPECT_EQ(offcpu_hist_bucket(48 * kMs), 15u);
  const uint64_t hour = 3600ull * 1000 * kMs;
  EXPECT_EQ(offcpu_hist_bucket(hour), 31u); // 2^31 us = 36 min
  EXPECT_EQ(offcpu_hist_bucket(UINT64_MAX), 31u);
  for (size_t b = 0; b < Latency::kBuckets; b++) {
    EXPECT_EQ(offcpu_hist_bucket(Latency::low_ns(b)), b);
    if (b + 1 < Latency::kBuckets) {
      EXPECT_EQ(offcpu_hist_bucket(Latency::high_ns(b) - 1), b);
    }
  }
}

TEST(LatencyQuantiles, InTheRanksBucketAndNeverAboveTheMax) {
  // 1000 x 1.5 ms and 20 x 48 ms: p50 among the short, p99 (rank 1010)
  // among the long ones.
  Latency l = of({{1500 * kUs, 1000}, {48 * kMs, 20}});
  uint64_t p50 = l.quantile_ns(0.5), p99 = l.quantile_ns(0.99);
  EXPECT_GE(p50, 1024 * kUs);
  EXPECT_LT(p50, 2048 * kUs);
  EXPECT_GE(p99, 32768 * kUs);
  EXPECT_LE(p99, 48 * kMs);
  EXPECT_EQ(l.quantile_ns(1.0), 48 * kMs);
  // Within a bucket, evenly spread: rank 510, the 510th of its 1000.
  EXPECT_NEAR(static_cast<double>(p50), 1024 * kUs + 1024 * kUs * 0.5095, kUs);
  // One wait is its own quantiles.
  Latency one = of({{6 * kMs, 1}});
  EXPECT_EQ(one.quantile_ns(0.5), 6 * kMs);
  EXPECT_EQ(one.quantile_ns(0.99), 6 * kMs);
  EXPECT_EQ(Latency{}.quantile_ns(0.5), 0u);
  // The last bucket has no top: the max is its end.
  Latency long_ones = of({{5000ull * 1000 * kMs, 3}});
  EXPECT_EQ(long_ones.quantile_ns(0.99), 5000ull * 1000 * kMs);
}

TEST(LatencyMerge, AddsBucketsAndKeepsTheLargerMax) {
  Latency a = of({{1500 * kUs, 10}}), b = of({{6 * kMs, 5}, {3 * kUs, 1}});
  a.add(b);
  EXPECT_EQ(a.waits, 16u);
  EXPECT_EQ(a.max_ns, 6 * kMs);
  EXPECT_EQ(a.bucket(10), 10u);
  EXPECT_EQ(a.bucket(12), 5u);
  EXPECT_EQ(a.bucket(1), 1u);
}

TEST(LatencyMerge, BucketsKeptFromFirstToLastWidenEitherWay) {
  Latency l;
  l.add_to_bucket(12, 3); // one bucket, held inline
  l.add_to_bucket(12, 2);
  EXPECT_EQ(l.bucket(12), 5u);
  l.add_to_bucket(20, 1); // wider above
  l.add_to_bucket(2, 4);  // and below
  l.add_to_bucket(0, 0);  // nothing added: no wider
  const Latency copy = l;
  for (size_t b = 0; b < Latency::kBuckets; b++) {
    const uint64_t want = b == 12 ? 5 : b == 20 ? 1 : b == 2 ? 4 : 0;
    EXPECT_EQ(copy.bucket(b), want) << b;
  }
  Latency merged;
  merged.add(copy);
  merged.add(copy);
  EXPECT_EQ(merged.bucket(2), 8u);
  EXPECT_EQ(merged.bucket(20), 2u);
  EXPECT_EQ(merged.bucket(Latency::kBuckets), 0u); // past the last
}

TEST(LatencyMerge, BpfBucketsThatWrappedGetTheirWaitsBack) {
  uint32_t hist[OFFCPU_HIST_BUCKETS] = {};
  hist[3] = 7;
  hist[10] = 100; // wrapped once: 2^32 + 100
  const uint64_t count = 7 + (uint64_t{1} << 32) + 100;
  Latency l = Latency::from_buckets(hist, count, 2 * kMs);
  EXPECT_EQ(l.waits, count);
  EXPECT_EQ(l.bucket(3), 7u);
  EXPECT_EQ(l.bucket(10), (uint64_t{1} << 32) + 100);
  // Buckets that add up to the count stay as they are.
  Latency same = Latency::from_buckets(hist, 107, 2 * kMs);
  EXPECT_EQ(same.waits, 107u);
  EXPECT_EQ(same.bucket(10), 100u);
}

Sample mixed_sample() {
  Sample s = test::sample("mixA", {"main", "wait_mixed"},
                          {"do_nanosleep", "__schedule"},
                          1000 * 1500 * kUs + 20 * 48 * kMs, 7, 1020);
  s.latency = of({{1500 * kUs, 1000}, {48 * kMs, 20}});
  return s;
}

TEST(LatencyText, QuantilesByDefaultHistogramWithVerbose) {
  Profile p = test::profile({mixed_sample()});
  std::string plain = render_text(p, LayoutOptions{});
  EXPECT_NE(plain.find("        2460000 us in 1020 waits\n"
                       "        max 48000 us, p50 ~1546 us, p99 ~40384 us\n"),
            std::string::npos)
      << plain;
  EXPECT_EQ(plain.find("distribution"), std::string::npos);
  std::string verbose = render_text(p, LayoutOptions{}, true);
  EXPECT_NE(verbose.find("                    us : waits    |distribution"),
            std::string::npos)
      << verbose;
  EXPECT_NE(verbose.find("         1024 -> 2047  : 1000     |*****"),
            std::string::npos)
      << verbose;
  EXPECT_NE(verbose.find("        32768 -> 65535 : 20       |*  "),
            std::string::npos)
      << verbose;
  // From the first to the last bucket with waits, the empty between.
  EXPECT_NE(verbose.find("        16384 -> 32767 : 0        |   "),
            std::string::npos);
  EXPECT_EQ(verbose.find(" 512 -> "), std::string::npos);
}

TEST(LatencyText, IdenticalStacksMergeTheirDistributions) {
  Sample a = mixed_sample(), b = mixed_sample();
  b.latency = of({{100 * kMs, 1}});
  b.count = 1;
  b.total_ns = 100 * kMs;
  std::string out = render_text(test::profile({a, b}), LayoutOptions{});
  EXPECT_NE(out.find(" in 1021 waits\n        max 100000 us,"),
            std::string::npos)
      << out;
  // One wait alone: its total says it all.
  std::string one = render_text(test::profile({b}), LayoutOptions{});
  EXPECT_EQ(one.find("max"), std::string::npos) << one;
}

TEST(LatencyPprof, LabelsWithUnitsAndTheHistogram) {
  std::string pb = encode_pprof(test::profile({mixed_sample()}));
  for (const char *s : {"wait_max", "wait_p50", "wait_p99", "nanoseconds",
                        "wait_histogram", "1024us:1000 32768us:20"})
    EXPECT_NE(pb.find(s), std::string::npos) << s;
  // Folded input has no distribution: no labels.
  Sample plain = mixed_sample();
  plain.latency = {};
  EXPECT_EQ(encode_pprof(test::profile({plain})).find("wait_max"),
            std::string::npos);
}

TEST(LatencySvg, TooltipsMergeTheDistributionUpTheTree) {
  Sample a = mixed_sample();
  Sample b =
      test::sample("mixA", {"main", "other_wait"},
                   {"do_nanosleep", "__schedule"}, 200 * 6 * kMs, 7, 200);
  b.latency = of({{6 * kMs, 200}});
  std::string svg = render_flamegraph(
      flame_stacks(test::profile({a, b}), LayoutOptions{}), {});
  // The function: its own waits.
  EXPECT_NE(svg.find("<title>wait_mixed (2,460,000 us, 67.21%)\n1,020 waits, "
                     "max 48,000 us, p50 ~1,546 us, p99 ~40,384 us\nus: "
                     "[1024,2048) 1000 [32768,65536) 20</title>"),
            std::string::npos)
      << svg;
  // Their caller and the thread: both stacks' waits.
  EXPECT_NE(svg.find("<title>main (3,660,000 us, 100.00%)\n1,220 waits, max "
                     "48,000 us"),
            std::string::npos);
  EXPECT_NE(svg.find("us: [1024,2048) 1000 [4096,8192) 200 [32768,65536) 20"
                     "</title><rect"),
            std::string::npos);
  // Without distributions (folded input) the tooltips are as they were.
  a.latency = {};
  b.latency = {};
  std::string plain = render_flamegraph(
      flame_stacks(test::profile({a, b}), LayoutOptions{}), {});
  EXPECT_NE(plain.find("<title>main (3,660,000 us, 100.00%)</title>"),
            std::string::npos);
}

} // namespace
} // namespace offcpu
