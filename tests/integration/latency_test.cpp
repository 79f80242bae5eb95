// The latency distribution per stack (issue #27): a workload of two threads
// blocking in named functions with known mixes of wait lengths, measured by
// the threads themselves, against what offcpu reports of them in the text
// report (-v: with histograms), pprof (read back by `go tool pprof`) and the
// SVG's tooltips, all three from one run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "support/process.h"

namespace offcpu {
namespace {

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The log2 bucket (of microseconds) a bucket's lower bound names.
int bucket_of_low(uint64_t low_us) {
  int b = 0;
  while (low_us > 1) {
    low_us >>= 1;
    b++;
  }
  return b;
}

// A distribution as one output shows it, or as the workload measured it.
struct Dist {
  std::map<int, uint64_t> buckets;
  uint64_t waits = 0;
  double max_us = 0, p50_us = -1, p99_us = -1;

  void add(const Dist &o) {
    for (const auto &[b, n] : o.buckets)
      buckets[b] += n;
    waits += o.waits;
    max_us = std::max(max_us, o.max_us);
  }
  // The bucket of the rank-th shortest wait (the last bucket past them).
  int bucket_of_rank(uint64_t rank) const {
    uint64_t seen = 0;
    for (const auto &[b, n] : buckets) {
      seen += n;
      if (seen >= rank)
        return b;
    }
    return buckets.empty() ? -1 : buckets.rbegin()->first;
  }
  // The bucket of the nearest-rank q-quantile.
  int quantile_bucket(double q) const {
    return bucket_of_rank(std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(waits)))));
  }
};

std::string show(const Dist &d) {
  std::string s = std::to_string(d.waits) + " waits, max " +
                  std::to_string(d.max_us) + " us:";
  for (const auto &[b, n] : d.buckets)
    s += " " + std::to_string(b) + ":" + std::to_string(n);
  return s;
}

struct Truth {
  std::string comm;
  std::string tid;
  Dist dist;
};

// "COMM TID waits N max_ns M hist B:N ..." per thread.
std::vector<Truth> read_truth(const std::string &text) {
  std::vector<Truth> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    Truth t;
    std::string word;
    uint64_t max_ns = 0;
    f >> t.comm >> t.tid >> word >> t.dist.waits >> word >> max_ns >> word;
    t.dist.max_us = static_cast<double>(max_ns) / 1000.0;
    while (f >> word) {
      size_t colon = word.find(':');
      t.dist.buckets[std::stoi(word.substr(0, colon))] =
          std::stoull(word.substr(colon + 1));
    }
    out.push_back(t);
  }
  return out;
}

// How much longer than measured a wait may show: a switch-in sched_switch
// did not report is recovered from the scheduler's clock, which is not the
// one the workload reads.
constexpr double kClockSlackUs = 1000;

bool in_bucket(double us, int b) {
  const double low = b == 0 ? 0 : std::ldexp(1.0, b);
  return us >= low && us < std::ldexp(1.0, b + 1);
}

// What offcpu shows of one thread's waits against what the thread measured:
// every sleep counted, the histogram bucket for bucket where the two can
// only agree, the longest bounded by the measured one. A sleep is off CPU
// within the interval the thread measured around it, so at most as long:
// below each bucket's top offcpu counts at least the waits the thread
// counted (two may differ: a spurious wake-up inside nanosleep), and at
// most a few more, the sleeps measured longer than they slept (the thread
// preempted between its clock and the system call, which a loaded host
// does to a few percent of them).
void expect_thread_matches(const Dist &got, const Truth &t,
                           const std::string &where) {
  SCOPED_TRACE(where + " " + t.comm + ": got " + show(got) + "; truth " +
               show(t.dist));
  EXPECT_GE(got.waits, t.dist.waits - 2);
  EXPECT_LE(got.waits, t.dist.waits + 2);
  std::map<int, uint64_t> all = t.dist.buckets;
  for (const auto &[b, n] : got.buckets)
    all[b] += 0;
  uint64_t got_below = 0, truth_below = 0;
  const uint64_t stretched = 2 + t.dist.waits * 5 / 100;
  for (const auto &[b, n] : all) {
    got_below += got.buckets.count(b) ? got.buckets.at(b) : 0;
    truth_below += t.dist.buckets.count(b) ? t.dist.buckets.at(b) : 0;
    EXPECT_GE(got_below + 2, truth_below) << "below bucket " << b << "'s top";
    EXPECT_LE(got_below, truth_below + stretched)
        << "below bucket " << b << "'s top";
  }
  // Off CPU within each measured sleep: not longer than the longest, but
  // for the odd wait whose end the kernel did not report through
  // sched_switch, ended from its run-queue clock (see end_unseen_wait).
  EXPECT_LE(got.max_us, t.dist.max_us + kClockSlackUs);
}

// The waits of the stack that blocks in the thread's function: most of the
// thread's (its first few may have been walked before the process's tables
// were ready, and show as missed stacks), the longest bounded as the
// thread's, and the quantiles in the right bucket: each estimate inside the
// bucket its rank falls in, and that bucket the one the thread's own
// measurements put the quantile in, to within the waits the two counts
// differ by (which can move a rank across a bucket's edge).
void expect_stack_matches(const Dist &got, const Truth &t, double longest_us,
                          const std::string &where) {
  SCOPED_TRACE(where + " " + t.comm + ": got " + show(got) + "; truth " +
               show(t.dist));
  EXPECT_GE(got.waits, t.dist.waits / 2);
  EXPECT_LE(got.waits, t.dist.waits + 2);
  EXPECT_GE(got.max_us, longest_us) << "the longest sleep asked for";
  EXPECT_LE(got.max_us, t.dist.max_us + kClockSlackUs);
  const uint64_t apart = (got.waits > t.dist.waits ? got.waits - t.dist.waits
                                                   : t.dist.waits - got.waits) +
                         2 + t.dist.waits / 100;
  for (double q : {0.5, 0.99}) {
    const double est = q == 0.5 ? got.p50_us : got.p99_us;
    const int own_b = got.quantile_bucket(q);
    EXPECT_TRUE(in_bucket(est, own_b))
        << "p" << q * 100 << " " << est << " us outside its own bucket "
        << own_b;
    EXPECT_LE(est, got.max_us);
    const uint64_t rank =
        static_cast<uint64_t>(std::ceil(q * static_cast<double>(t.dist.waits)));
    const int low = t.dist.bucket_of_rank(rank > apart ? rank - apart : 1),
              high = t.dist.bucket_of_rank(rank + apart);
    EXPECT_TRUE(own_b >= low && own_b <= high)
        << "p" << q * 100 << " in bucket " << own_b << ", the truth's "
        << t.dist.quantile_bucket(q) << " (" << low << " to " << high
        << " within " << apart << " waits)";
  }
}

class LatencyDistribution : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
    char tmpl[] = "/tmp/offcpu-latency-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // --state S: the sleeps, not the preemptions a loaded host adds (the
    // threads measure their sleeps only).
    auto r =
        test::run({OFFCPU_BIN, "-v", "--state", "S", "-o", dir_ + "/out.txt",
                   "-o", dir_ + "/out.svg", "-o", dir_ + "/out.pb.gz", "--",
                   WORKLOAD_LATENCY_MIX, dir_ + "/truth"},
                  120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    truth_ = read_truth(slurp(dir_ + "/truth"));
    ASSERT_EQ(truth_.size(), 2u) << slurp(dir_ + "/truth");
    // The plan: 1000 x 1.5 ms and 20 x 48 ms; 200 x 6 ms.
    ASSERT_EQ(truth_[0].comm, "mixA");
    ASSERT_EQ(truth_[0].dist.waits, 1020u);
    ASSERT_GE(truth_[0].dist.max_us, 48000);
    ASSERT_EQ(truth_[1].comm, "steadyB");
    ASSERT_EQ(truth_[1].dist.waits, 200u);
  }
  void TearDown() override {
    if (!dir_.empty())
      test::run({"/bin/rm", "-rf", dir_}, 10);
  }
  void expect_stack(const Dist &got, const Truth &t, const std::string &where) {
    expect_stack_matches(got, t, t.comm == "mixA" ? 48000 : 6000, where);
  }
  std::string dir_;
  std::vector<Truth> truth_;
};

// Text, -v: per stack its totals, "max X us, p50 ~Y us, p99 ~Z us" and the
// BCC-style histogram; one wait shows its total only.
TEST_F(LatencyDistribution, TextReportShowsEachStacksDistribution) {
  const std::string text = slurp(dir_ + "/out.txt");
  std::regex thread_re("^    -                (.+) \\(([0-9]+)\\)$");
  std::regex totals_re("^        ([0-9]+) us in ([0-9]+) waits?$");
  std::regex quant_re(
      "^        max ([0-9]+) us, p50 ~([0-9]+) us, p99 ~([0-9]+) us$");
  std::regex bar_re(
      "^ +([0-9]+) -> +([0-9]+|inf) +: ([0-9]+) +\\|\\**\\s*\\|$");
  std::map<std::string, Dist> thread_total;
  std::map<std::string, Dist> stack; // the stack through the function
  std::istringstream in(text + "\n");
  std::vector<std::string> entry;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      entry.push_back(line);
      continue;
    }
    if (entry.empty())
      continue;
    std::string tid, fn;
    bool nanosleep = false, thread = false;
    Dist d;
    bool quantiles = false;
    uint64_t total_us = 0;
    for (const std::string &l : entry) {
      std::smatch m;
      if (std::regex_match(l, m, thread_re)) {
        tid = m[2];
        thread = true;
      } else if (std::regex_match(l, m, totals_re)) {
        total_us = std::stoull(m[1]);
        d.waits = std::stoull(m[2]);
      } else if (std::regex_match(l, m, quant_re)) {
        quantiles = true;
        d.max_us = std::stod(m[1]);
        d.p50_us = std::stod(m[2]);
        d.p99_us = std::stod(m[3]);
      } else if (std::regex_match(l, m, bar_re)) {
        if (std::stoull(m[3]))
          d.buckets[bucket_of_low(std::stoull(m[1]))] = std::stoull(m[3]);
      } else if (l == "    wait_mixed" || l == "    wait_steady")
        fn = l.substr(4);
      else if (l == "    do_nanosleep")
        nanosleep = true;
    }
    if (!thread) { // the summary by state at the end
      entry.clear();
      continue;
    }
    if (d.waits == 1) { // its total is its length
      d.max_us = static_cast<double>(total_us);
      d.buckets[bucket_of_low(total_us)] = 1;
    } else {
      EXPECT_TRUE(quantiles) << "no distribution line in:\n"
                             << ::testing::PrintToString(entry);
    }
    thread_total[tid].add(d);
    if (!fn.empty() && nanosleep && d.waits > stack[tid].waits)
      stack[tid] = d;
    entry.clear();
  }
  for (const Truth &t : truth_) {
    expect_thread_matches(thread_total[t.tid], t, "text");
    expect_stack(stack[t.tid], t, "text");
  }
}

// pprof: the labels wait_max, wait_p50, wait_p99 (nanoseconds) and
// wait_histogram on each sample, as `go tool pprof -raw` reads them.
TEST_F(LatencyDistribution, PprofLabelsCarryEachSamplesDistribution) {
  if (access("/usr/bin/go", X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed";
  auto raw = test::run(
      {"/usr/bin/go", "tool", "pprof", "-raw", dir_ + "/out.pb.gz"}, 120);
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  // Locations: "    12: 0x55.. M=1 wait_mixed file.c:71 s=69", then one
  // indented line per function inlined at that address (pprof's Lines).
  std::map<std::string, std::vector<std::string>> location_names;
  std::string last_location;
  std::regex loc_re(
      "^ +([0-9]+): 0x[0-9a-f]+ (?:M=[0-9]+ )?(\\S+) \\S*:[0-9]+ s=[0-9]+$");
  std::regex inlined_re("^ {8,}(\\S+) \\S*:[0-9]+ s=[0-9]+$");
  std::regex sample_re("^ +([0-9]+) +[0-9]+: ([0-9 ]+)$");
  std::istringstream in(raw.out);
  struct RawSample {
    uint64_t count = 0;
    std::vector<std::string> locs;
    std::string labels;
  };
  std::vector<RawSample> samples;
  bool in_samples = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind("Samples:", 0) == 0) {
      in_samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0)
      in_samples = false;
    if (in_samples && std::regex_match(line, m, sample_re)) {
      RawSample s;
      s.count = std::stoull(m[1]);
      std::istringstream ids(m[2].str());
      for (std::string id; ids >> id;)
        s.locs.push_back(id);
      samples.push_back(s);
    } else if (in_samples && !samples.empty() && line.rfind("      ", 0) == 0) {
      samples.back().labels += line;
    } else if (!in_samples && std::regex_match(line, m, loc_re)) {
      last_location = m[1];
      location_names[last_location].push_back(m[2]);
    } else if (!in_samples && !last_location.empty() &&
               std::regex_match(line, m, inlined_re)) {
      location_names[last_location].push_back(m[1]);
    }
  }
  ASSERT_FALSE(samples.empty()) << raw.out;
  auto label_num = [](const std::string &labels, const std::string &key) {
    std::smatch m;
    std::regex re(key + ":\\[([0-9]+) nanoseconds\\]");
    return std::regex_search(labels, m, re) ? std::stod(m[1]) / 1000.0 : -1.0;
  };
  std::map<std::string, Dist> thread_total, stack;
  for (const RawSample &s : samples) {
    std::smatch m;
    if (!std::regex_search(s.labels, m, std::regex("tid:\\[([0-9]+)\\]")))
      continue;
    const std::string tid = m[1];
    ASSERT_TRUE(std::regex_search(s.labels, m,
                                  std::regex("wait_histogram:\\[([^\\]]*)\\]")))
        << s.labels;
    Dist d;
    std::istringstream hist(m[1].str());
    for (std::string item; hist >> item;) {
      size_t us = item.find("us:");
      ASSERT_NE(us, std::string::npos) << item;
      uint64_t n = std::stoull(item.substr(us + 3));
      d.buckets[bucket_of_low(std::stoull(item.substr(0, us)))] += n;
      d.waits += n;
    }
    EXPECT_EQ(d.waits, s.count) << "the histogram holds every wait";
    d.max_us = label_num(s.labels, "wait_max");
    d.p50_us = label_num(s.labels, "wait_p50");
    d.p99_us = label_num(s.labels, "wait_p99");
    thread_total[tid].add(d);
    bool named = false, nanosleep = false;
    for (const std::string &id : s.locs)
      for (const std::string &name : location_names[id]) {
        named |= name == "wait_mixed" || name == "wait_steady";
        nanosleep |= name == "do_nanosleep";
      }
    if (named && nanosleep && d.waits > stack[tid].waits)
      stack[tid] = d;
  }
  for (const Truth &t : truth_) {
    expect_thread_matches(thread_total[t.tid], t, "pprof");
    expect_stack(stack[t.tid], t, "pprof");
  }
}

// SVG: a frame's tooltip holds its subtree's distribution: the thread's
// frame all of the thread's waits, the function's the waits under it.
TEST_F(LatencyDistribution, SvgTooltipsShowTheSubtreesDistribution) {
  const std::string svg = slurp(dir_ + "/out.svg");
  // <g class="f" ... data-d="D"><title>NAME (V us, P%)\nN waits, max X us,
  // p50 ~Y us, p99 ~Z us\nus: [lo,hi) n ...</title>
  std::regex g_re("data-d=\"([0-9]+)\"><title>([^<]*)</title>");
  std::regex head_re("^(.+) \\(([0-9,]+) us, [0-9.]+%\\)$");
  std::regex stats_re("^([0-9,]+) waits?, max ([0-9,]+) us(?:, p50 ~([0-9,]+) "
                      "us, p99 ~([0-9,]+) us)?$");
  std::regex bucket_re("\\[([0-9]+),([0-9]+|inf)\\) ([0-9]+)");
  auto number = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stod(s);
  };
  std::map<std::string, Dist> comm_node, fn_node;
  std::string comm;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), g_re);
       it != std::sregex_iterator(); ++it) {
    const int depth = std::stoi((*it)[1]);
    std::istringstream title((*it)[2].str());
    std::string head, stats, hist;
    std::getline(title, head);
    std::getline(title, stats);
    std::getline(title, hist);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(head, m, head_re)) << head;
    const std::string name = m[1];
    if (depth == 1)
      comm = name;
    if (stats.empty())
      continue;
    ASSERT_TRUE(std::regex_match(stats, m, stats_re)) << stats;
    Dist d;
    d.waits = static_cast<uint64_t>(number(m[1]));
    d.max_us = number(m[2]);
    if (m[3].matched) {
      d.p50_us = number(m[3]);
      d.p99_us = number(m[4]);
    }
    ASSERT_EQ(hist.rfind("us: ", 0), 0u) << hist;
    uint64_t in_buckets = 0;
    for (auto b = std::sregex_iterator(hist.begin(), hist.end(), bucket_re);
         b != std::sregex_iterator(); ++b) {
      d.buckets[bucket_of_low(std::stoull((*b)[1]))] = std::stoull((*b)[3]);
      in_buckets += std::stoull((*b)[3]);
    }
    EXPECT_EQ(in_buckets, d.waits) << hist;
    if (depth == 1)
      comm_node[name] = d;
    else if ((name == "wait_mixed" || name == "wait_steady") &&
             d.waits > fn_node[comm].waits)
      fn_node[comm] = d;
  }
  for (const Truth &t : truth_) {
    ASSERT_TRUE(comm_node.count(t.comm)) << t.comm << " has no frame";
    expect_thread_matches(comm_node[t.comm], t, "svg thread");
    // The function's subtree: its sleeps.
    expect_stack(fn_node[t.comm], t, "svg function");
  }
}

} // namespace
} // namespace offcpu
