// Waits in progress when the window opens, with the window edges'
// iterators verified after the attach (collect/edge_loader.h, issue #27
// start-up; the split load's, the default here): a wait open at
// start that ends before they are loaded gets its user stack at its
// switch-in, one still open gets it from the late pass or at stop, and a
// stop that comes before they are loaded waits for them. --delay-edges
// holds their load back, so each case happens in every run.
// The real binary against tests/workloads/seeded_waits.c (no frame
// pointers: only the unwind tables reach main).
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <regex>

#include "support/folded_parse.h"
#include "support/process.h"
#include "util/fd.h"

namespace offcpu {
namespace {

class SeededWaits : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
  }
};

// The time of `comm`'s lines that have `frame`, and of those that also reach
// `outer` (whole).
struct Time {
  uint64_t us = 0, whole_us = 0;
  std::string lines;
};

Time time_in(const std::string &folded, const std::string &comm,
             const std::string &frame, const std::string &outer) {
  Time t;
  for (const auto &l : test::parse_folded(folded)) {
    if (l.frames.empty() || l.frames[0] != comm)
      continue;
    t.lines += l.text + "\n";
    if (test::frame_index(l, frame) < 0)
      continue;
    t.us += l.value;
    if (test::frame_index(l, outer) >= 0)
      t.whole_us += l.value;
  }
  return t;
}

constexpr const char *kMain = "seeded_waits";
constexpr const char *kStuck = "sw_stuck";

test::RunResult trace(const test::Subprocess &w, const std::string &seconds,
                      std::vector<std::string> extra) {
  std::vector<std::string> args = {OFFCPU_BIN, "-v", "-f",
                                   "--wakers", "-p", std::to_string(w.pid())};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(seconds);
  return test::run(args, 60);
}

// Only the split load (the default plan, with --wakers or without)
// verifies them after the attach; the light object alone loads them with
// the rest.
TEST_F(SeededWaits, OnlyTheSplitLoadVerifiesThemAfterTheAttach) {
  const std::string later = "verified after the attach";
  auto light =
      test::run({OFFCPU_BIN, "-v", "--loader", "light", "-f", "0.2"}, 60);
  ASSERT_EQ(light.exit_code, 0) << light.err;
  EXPECT_EQ(light.err.find(later), std::string::npos) << light.err;
  for (bool wakers : {false, true}) {
    std::vector<std::string> args = {OFFCPU_BIN, "-v", "-f", "0.2"};
    if (wakers)
      args.push_back("--wakers");
    auto split = test::run(args, 60);
    ASSERT_EQ(split.exit_code, 0) << split.err;
    EXPECT_NE(split.err.find(later), std::string::npos) << split.err;
  }
}

// Reads 8-byte variables of the .bss of process `pid`'s BPF object (the one
// map of its descriptors whose name ends in ".bss"), placed by the map's
// BTF.
class LiveBss {
public:
  explicit LiveBss(pid_t pid) : pid_(pid) {}
  ~LiveBss() { btf__free(btf_); }
  LiveBss(const LiveBss &) = delete;
  LiveBss &operator=(const LiveBss &) = delete;

  // nullopt until the map is there (one with `vars`, all 8 bytes: the
  // probes' own objects, loaded and let go before, have a .bss too).
  std::optional<uint64_t> read(const std::string &var,
                               const std::vector<std::string> &vars) {
    if (map_.get() < 0 && !find(vars))
      return std::nullopt;
    std::optional<uint32_t> at = offset(var);
    if (!at)
      return std::nullopt;
    std::vector<char> value(value_size_);
    const int zero = 0;
    if (bpf_map_lookup_elem(map_.get(), &zero, value.data()) != 0)
      return std::nullopt;
    uint64_t v = 0;
    memcpy(&v, value.data() + *at, sizeof(v));
    return v;
  }

private:
  bool find(const std::vector<std::string> &vars) {
    const std::string dir = "/proc/" + std::to_string(pid_) + "/fdinfo";
    DIR *d = opendir(dir.c_str());
    if (!d)
      return false;
    while (dirent *e = readdir(d)) {
      std::ifstream in(dir + "/" + e->d_name);
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("map_id:", 0) != 0)
          continue;
        UniqueFd fd(bpf_map_get_fd_by_id(
            static_cast<uint32_t>(std::stoul(line.substr(7)))));
        bpf_map_info info{};
        uint32_t len = sizeof(info);
        if (fd.get() < 0 || bpf_obj_get_info_by_fd(fd.get(), &info, &len))
          continue;
        const std::string name = info.name;
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".bss") != 0 ||
            !info.btf_id)
          continue;
        btf__free(btf_);
        btf_ = btf__load_from_kernel_by_id(info.btf_id);
        if (!btf_)
          continue;
        value_type_ = info.btf_value_type_id;
        value_size_ = info.value_size;
        bool all = true;
        for (const std::string &v : vars)
          all = all && offset(v).has_value();
        if (!all)
          continue;
        map_ = std::move(fd);
        closedir(d);
        return true;
      }
    }
    closedir(d);
    return false;
  }

  std::optional<uint32_t> offset(const std::string &var) {
    const btf_type *sec = btf__type_by_id(btf_, value_type_);
    if (!sec || !btf_is_datasec(sec))
      return std::nullopt;
    const btf_var_secinfo *v = btf_var_secinfos(sec);
    for (uint16_t i = 0; i < btf_vlen(sec); ++i, ++v) {
      const btf_type *t = btf__type_by_id(btf_, v->type);
      if (t && var == btf__name_by_offset(btf_, t->name_off) &&
          v->size == sizeof(uint64_t) && v->offset + v->size <= value_size_)
        return v->offset;
    }
    return std::nullopt;
  }

  pid_t pid_;
  UniqueFd map_;
  btf *btf_ = nullptr;
  uint32_t value_type_ = 0, value_size_ = 0;
};

uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ts.tv_nsec);
}

// The edges' iterators load while the hooks run, through a loader libbpf
// generates for them, and libbpf's loader writes each data map's initial
// value: over the live .bss here, which the split loader rewrites away.
// The window's start and end, written at the attach, read the same after
// that load as before it.
TEST_F(SeededWaits, TheEdgesLoadLeavesTheLiveDataAsItIs) {
  test::Subprocess w({WORKLOAD_SEEDED_WAITS, "5"});
  ASSERT_TRUE(w.read_line(10)) << "the workload did not start";
  test::Subprocess t({OFFCPU_BIN, "-v", "-f", "-p", std::to_string(w.pid()),
                      "--delay-edges", "1000", "2.5"});
  LiveBss bss(t.pid());
  struct Read {
    uint64_t at_ns, start, stop;
  };
  std::vector<Read> reads;
  const uint64_t give_up = monotonic_now_ns() + 20000000000u;
  for (uint64_t now = monotonic_now_ns(); now < give_up;
       now = monotonic_now_ns()) {
    const std::vector<std::string> vars = {"window_start_ns", "stop_ns"};
    std::optional<uint64_t> start = bss.read(vars[0], vars);
    std::optional<uint64_t> stop = bss.read(vars[1], vars);
    // From the attach on (the start written, then the end), whatever is
    // there.
    if (start && stop && ((*start && *stop) || !reads.empty()))
      reads.push_back({now, *start, *stop});
    // Until 0.2 s before the window's end.
    if (!reads.empty() && now + 200000000u > reads.front().stop)
      break;
    usleep(20000);
  }
  auto r = t.wait(30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(reads.empty()) << "offcpu's .bss never read\n" << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m,
                                std::regex("the window edges' iterators "
                                           "loaded \\(([^)]*)\\) .* walked "
                                           "([0-9]+) ms")))
      << r.err;
  // The loader this test is for (libbpf's takes the maps as they are).
  ASSERT_EQ(m[1], "generated loader") << r.err;
  const Read &first = reads.front();
  const uint64_t loaded = first.start + std::stoull(m[2]) * 1000000u;
  size_t after = 0;
  for (const Read &x : reads) {
    EXPECT_EQ(x.start, first.start)
        << (x.at_ns - first.start) / 1000000 << " ms into the window";
    EXPECT_EQ(x.stop, first.stop)
        << (x.at_ns - first.start) / 1000000 << " ms into the window";
    after += x.at_ns > loaded;
  }
  EXPECT_GT(after, 5u) << "too few reads after the edges loaded at "
                       << (loaded - first.start) / 1000000 << " ms";
}

// The main thread naps 2 s from before the attach; the edges load 3 s
// after it. Its wait, open at start, ends first: its user stack is taken at
// its switch-in from the stack it blocked on (before, the late pass would
// have found it gone: [Missed User Stack]).
TEST_F(SeededWaits, WaitEndedBeforeTheEdgesLoadKeepsItsUserStack) {
  test::Subprocess w({WORKLOAD_SEEDED_WAITS, "2"});
  ASSERT_TRUE(w.read_line(10)) << "the workload did not start";
  auto r = trace(w, "3.5", {"--delay-edges", "3000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.err.find("verified after the attach"), std::string::npos)
      << "the plan this test is for: " << r.err;
  EXPECT_NE(r.err.find("the window edges' iterators loaded"), std::string::npos)
      << r.err;
  Time before = time_in(r.out, kMain, "sw_nap_from_before", "main");
  // The rest of the 2 s nap after the attach (~1.8 s on a quiet host).
  EXPECT_GT(before.us, 500000u) << before.lines << r.err;
  EXPECT_LT(before.us, 2000000u) << before.lines;
  EXPECT_EQ(before.whole_us, before.us) << before.lines;
  // Every wait of the main thread has its whole user stack.
  Time all = time_in(r.out, kMain, "sw_nap", "main");
  EXPECT_EQ(all.whole_us, all.us) << all.lines;
  EXPECT_GT(all.us, 3000000u) << all.lines;
  // The thread blocked all window: its stack from the late pass.
  Time stuck = time_in(r.out, kStuck, "sw_block_all_window", "start_thread");
  EXPECT_NEAR(static_cast<double>(stuck.whole_us), 3.5e6, 3.5e6 * 0.05)
      << stuck.lines;
}

// The window ends at 0.5 s, before the edges load (1.5 s): the stop waits
// for them, then charges the waits still open with their stacks.
TEST_F(SeededWaits, StopBeforeTheEdgesLoadWaitsForThem) {
  test::Subprocess w({WORKLOAD_SEEDED_WAITS, "5"});
  ASSERT_TRUE(w.read_line(10)) << "the workload did not start";
  auto r = trace(w, "0.5", {"--delay-edges", "1500"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char *comm : {kMain, kStuck}) {
    Time t =
        time_in(r.out, comm,
                comm == kMain ? "sw_nap_from_before" : "sw_block_all_window",
                comm == kMain ? "main" : "start_thread");
    EXPECT_NEAR(static_cast<double>(t.whole_us), 0.5e6, 0.5e6 * 0.05)
        << comm << "\n"
        << t.lines << r.err;
  }
}

// The edges' iterators fail to load: one warning says what is lost (the
// waits still open at stop: sw_stuck's), and the waits that ended are all
// there, those the thread held at stop too.
TEST_F(SeededWaits, EdgesThatFailToLoadAreReported) {
  test::Subprocess w({WORKLOAD_SEEDED_WAITS, "0.5"});
  ASSERT_TRUE(w.read_line(10)) << "the workload did not start";
  auto r = trace(w, "1.5", {"--fail-load", "edges"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("offcpu: warning: the programs of the window's edges "
                       "failed to load (Argument list too long): the waits "
                       "still open at stop are not charged ("),
            std::string::npos)
      << r.err;
  // Counted after the detach: sw_stuck's wait, and the main thread's if it
  // was in one of its 20 ms naps.
  const std::string counted = "not charged (";
  const size_t at = r.err.find(counted);
  ASSERT_NE(at, std::string::npos) << r.err;
  const int open = std::atoi(r.err.c_str() + at + counted.size());
  EXPECT_GE(open, 1) << r.err;
  EXPECT_LE(open, 2) << r.err;
  Time before = time_in(r.out, kMain, "sw_nap_from_before", "main");
  EXPECT_GT(before.whole_us, 0u) << before.lines;
  Time after = time_in(r.out, kMain, "sw_nap_after", "main");
  EXPECT_GT(after.whole_us, 700000u) << after.lines << r.err;
  EXPECT_EQ(time_in(r.out, kStuck, "sw_block_all_window", "main").us, 0u);
  EXPECT_EQ(after.whole_us, after.us) << after.lines;
}

} // namespace
} // namespace offcpu
