// Nothing lost silently: every wait of a workload that logs its own waits
// is counted; the window keeps its length on a saturated host; short-lived
// processes keep their names (or the loss is reported).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class Reliability : public test::RootTest {};

// "ready PID" from a workload.
int wait_ready(test::Subprocess &p) {
  auto line = p.read_line(20);
  if (!line || line->rfind("ready ", 0) != 0)
    throw std::runtime_error("workload did not start");
  return std::stoi(line->substr(6));
}

// The window offcpu -v reports, CLOCK_MONOTONIC ns.
std::pair<uint64_t, uint64_t> window_of(const std::string &err) {
  std::smatch m;
  static const std::regex re("window: ([0-9]+) to ([0-9]+) ns");
  if (!std::regex_search(err, m, re))
    return {0, 0};
  return {std::stoull(m[1]), std::stoull(m[2])};
}

// Time the hypervisor ran other guests' work on this VM's CPUs ("steal" in
// /proc/stat), in ns. A thread switched in while its vCPU is stolen counts
// that time as waiting in its own log, not in the kernel's view.
uint64_t steal_ns() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {};
  stat >> cpu;
  for (uint64_t &x : v)
    stat >> x;
  return v[7] * (1000000000 / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
}

struct LoggedWait {
  std::string comm;
  uint64_t start, end;
};

// One run of offcpu -p over a window of `seconds`, with what it said.
struct Run {
  uint64_t from, to;
  std::map<std::string, uint64_t> us_by_comm;
  std::string err;
  uint64_t steal_ns;
};

// `n` runs of offcpu -v -p PID -f 1 in a row.
std::vector<Run> trace_windows(int pid, int n) {
  std::vector<Run> runs;
  for (int i = 0; i < n; i++) {
    uint64_t steal_before = steal_ns();
    auto r = test::run(
        {OFFCPU_BIN, "-v", "-q", "-p", std::to_string(pid), "-f", "1"}, 30);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto [from, to] = window_of(r.err);
    EXPECT_GT(to, from) << r.err;
    runs.push_back({from, to, test::totals_by_comm(test::parse_folded(r.out)),
                    r.err, steal_ns() - steal_before});
  }
  return runs;
}

// Each run's off-CPU total per comm must match the sleepers workload's own
// log (the part of each logged wait inside the window) within 1%: a single
// lost wait of 10 ms or more is 1% of a window. On a VM, time the
// hypervisor stole right after a switch-in is waiting in the log but not
// off CPU: the steal the kernel reported during the window widens the
// tolerance. `comms`: how many comms the log has in each window.
void expect_runs_match_log(test::Subprocess &w, const std::vector<Run> &runs,
                           size_t comms) {
  test::sleep_seconds(0.5); // the last window's waits end and are logged
  w.signal(SIGUSR1);
  std::vector<LoggedWait> log;
  for (;;) {
    auto line = w.read_line(20);
    ASSERT_TRUE(line) << "workload log incomplete";
    if (*line == "end")
      break;
    std::istringstream in(*line);
    int tid;
    LoggedWait lw;
    in >> tid >> lw.comm >> lw.start >> lw.end;
    log.push_back(lw);
  }
  ASSERT_GT(log.size(), comms * runs.size());
  size_t compared = 0;
  for (size_t i = 0; i < runs.size(); i++) {
    EXPECT_EQ(runs[i].err.find("waits lost"), std::string::npos) << runs[i].err;
    std::map<std::string, uint64_t> truth_ns;
    for (const LoggedWait &lw : log) {
      uint64_t a = std::max(lw.start, runs[i].from);
      uint64_t b = std::min(lw.end, runs[i].to);
      if (b > a)
        truth_ns[lw.comm] += b - a;
    }
    ASSERT_EQ(truth_ns.size(), comms) << "run " << i;
    for (const auto &[comm, ns] : truth_ns) {
      double want = static_cast<double>(ns) / 1000;
      auto got_it = runs[i].us_by_comm.find(comm);
      double got = got_it == runs[i].us_by_comm.end()
                       ? 0
                       : static_cast<double>(got_it->second);
      double stolen = static_cast<double>(runs[i].steal_ns) / 1000;
      EXPECT_NEAR(got, want, want * 0.01 + stolen)
          << comm << " in run " << i << ": offcpu and the thread's own log "
          << "disagree (a wait lost or double counted); hypervisor steal "
          << stolen << " us; offcpu said: " << runs[i].err;
      compared++;
    }
  }
  EXPECT_EQ(compared, comms * runs.size());
}

// 40 threads sleep 20 ms in a loop and log each wait, over 20 windows of
// 1 s: each blocks at one stack all along, so its waits are held in its
// task storage until the window ends.
TEST_F(Reliability, EveryWaitOfALoggingWorkloadIsCounted) {
  test::Subprocess w({WORKLOAD_SLEEPERS, "truth", "40", "20"});
  const int pid = wait_ready(w);
  auto runs = trace_windows(pid, 20);
  expect_runs_match_log(w, runs, 40);
}

// 20 slots of threads that live 70 ms each, sleeping 10 ms at three stacks
// in turn, over 5 windows of 1 s: what a thread held when a third stack
// took the place of one of its two held ones, when it exited, or when the
// window ended, is all counted.
TEST_F(Reliability, EveryWaitOfShortLivedThreadsIsCounted) {
  test::Subprocess w({WORKLOAD_SLEEPERS, "churn", "20", "10", "7"});
  const int pid = wait_ready(w);
  auto runs = trace_windows(pid, 5);
  expect_runs_match_log(w, runs, 20);
}

// 2000 threads sleeping 10 ms saturate the CPUs with wake-ups: start-up and
// user space are slow, but the window is the duration asked for.
TEST_F(Reliability, WindowKeepsItsLengthOnASaturatedHost) {
  test::Subprocess w({WORKLOAD_SLEEPERS, "saturate", "2000", "10"});
  wait_ready(w);
  double t0 = test::now_seconds();
  auto r = test::run({OFFCPU_BIN, "-v", "-q", "-f", "2"}, 60);
  double wall = test::now_seconds() - t0;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto [from, to] = window_of(r.err);
  ASSERT_GT(to, from) << r.err;
  EXPECT_NEAR(static_cast<double>(to - from) / 1e9, 2.0, 0.02) << r.err;
  EXPECT_NE(r.err.find("waits already in progress seeded "), std::string::npos)
      << "-v says how long attach and seeding took: " << r.err;
  EXPECT_LT(wall, 15.0) << "the whole run, start-up and naming included: "
                        << r.err;
  auto totals = test::totals_by_comm(test::parse_folded(r.out));
  EXPECT_GT(totals["slp00"], 0u) << "the saturating threads were traced";
}

// Share of the children's off-CPU time whose user frames are all named.
double named_share(const std::vector<test::FoldedLine> &lines,
                   const std::string &comm, uint64_t *total = nullptr) {
  uint64_t all = 0, named = 0;
  for (const auto &l : lines) {
    if (l.frames.empty() || l.frames[0] != comm)
      continue;
    all += l.value;
    if (l.text.find("[unknown]") == std::string::npos &&
        l.text.find("[anon]") == std::string::npos)
      named += l.value;
  }
  if (total)
    *total = all;
  return all ? static_cast<double>(named) / static_cast<double>(all) : 0;
}

// 3000 forked children, 50 at a time, each blocked 2 ms in a named
// function and gone long before the window ends.
TEST_F(Reliability, ForkStormKeepsItsNames) {
  test::Subprocess storm({WORKLOAD_STORM, "fork", "3000", "50", "2"});
  wait_ready(storm);
  auto r = test::run({OFFCPU_BIN, "-q", "-f", "3"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  uint64_t total = 0;
  double share = named_share(lines, "stormchild", &total);
  ASSERT_GT(total, 1000000u) << "the storm ran during the window";
  EXPECT_GE(share, 0.99) << r.err;
  bool blocked_named = false;
  for (const auto &l : lines)
    blocked_named |= l.frames[0] == "stormchild" &&
                     test::frame_index(l, "storm_child_block") > 0;
  EXPECT_TRUE(blocked_named);
}

// Share of the children's off-CPU time in storm_child_block whose stack
// reaches glibc's start through storm_child_main: whole, in a program
// without frame pointers.
double whole_share(const std::vector<test::FoldedLine> &lines) {
  uint64_t all = 0, whole = 0;
  for (const auto &l : lines) {
    if (l.frames.empty() || l.frames[0] != "stormchild" ||
        test::frame_index(l, "storm_child_block") < 0)
      continue;
    all += l.value;
    // main may have tail-called storm_child_main: glibc's caller of main.
    int m = test::frame_index(l, "__libc_start_call_main");
    int c = test::frame_index(l, "storm_child_main");
    if (m > 0 && c > m && test::frame_index(l, "storm_child_block") > c)
      whole += l.value;
  }
  return all ? static_cast<double>(whole) / static_cast<double>(all) : 0;
}

// The storm built without frame pointers (as Debian builds), started once
// offcpu is tracing: forked children walk with their parent's tables at
// once; exec'd ones through the tables of the files they map, the walk
// finished by the rewalk iterator while they still sleep (each lives about
// 10 ms), before their own tables are installed.
TEST_F(Reliability, StormsWithoutFramePointersHaveWholeStacks) {
  for (const char *how : {"fork", "exec"}) {
    test::Subprocess tracer({OFFCPU_BIN, "-q", "-f", "4"});
    test::sleep_seconds(1.0); // attached, tables of the running processes in
    test::Subprocess storm({WORKLOAD_STORM_NOFP, how, "5000", "50", "10"});
    wait_ready(storm);
    auto done = storm.read_line(30);
    EXPECT_TRUE(done && *done == "done");
    auto r = tracer.wait(60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    double share = whole_share(test::parse_folded(r.out));
    RecordProperty(std::string(how) + "_whole_share", std::to_string(share));
    // Forked: 1.00 here. Exec'd: 0.97-0.99 on the 2-CPU development VM
    // (0.88-0.96 before walks through the files' tables by bpf_find_vma),
    // the rest gone before the rewalk (counted on stderr).
    EXPECT_GE(share, 0.95) << how << ": " << r.err;
  }
}

// The same with a fresh exec per child: nothing to inherit from the parent.
// Whatever is not named is reported, by cause: every [unknown] frame in
// the children's stacks is among those stderr counts. `ms`: how long each
// child blocks, about how long it lives after announcing its stack.
double exec_storm(const char *ms, std::string *err) {
  test::Subprocess storm({WORKLOAD_STORM, "exec", "2000", "50", ms});
  wait_ready(storm);
  auto r = test::run({OFFCPU_BIN, "-q", "-f", "3"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  uint64_t total = 0;
  auto lines = test::parse_folded(r.out);
  double share = named_share(lines, "stormchild", &total);
  EXPECT_GT(total, 1000000u);
  *err = r.err;
  // Output lines merge identical stacks: at most as many [unknown] frames
  // as were left unnamed.
  uint64_t unknown = 0;
  for (const auto &l : lines)
    if (!l.frames.empty() && l.frames[0] == "stormchild")
      for (const auto &f : l.frames)
        unknown += f == "[unknown]";
  std::smatch m;
  uint64_t reported = 0;
  if (std::regex_search(r.err, m,
                        std::regex("([0-9]+) user frames of [0-9]+ processes "
                                   "unnamed \\(\\[unknown\\]\\): they exited "
                                   "before their memory maps could be read")))
    reported = std::stoull(m[1]);
  EXPECT_LE(unknown, reported)
      << "unnamed frames must be reported (named share " << share
      << "): " << r.err;
  if (share < 1.0) {
    EXPECT_NE(r.err.find("exited before their memory maps could be read"),
              std::string::npos)
        << "unnamed frames must be reported: " << r.err;
  }
  return share;
}

// Children that live about 10 ms after their first wait: named, nearly all
// (0.90-0.97 on the idle 2-CPU development VM); on a busy machine offcpu
// reaches fewer children before they exit, and says how many it missed.
// The share is recorded, not bounded: how busy the machine is decides it.
TEST_F(Reliability, ExecStormNamesOrReportsTheLoss) {
  std::string err;
  double share = exec_storm("10", &err);
  RecordProperty("named_share", std::to_string(share));
  EXPECT_GT(share, 0.0) << "nothing named: " << err;
}

// Children that live 2 ms: on 2 CPUs busy with the storm, offcpu often
// gets to a child's maps after it exited (0.44-0.92 named here); whatever
// it could not name is reported (in exec_storm).
TEST_F(Reliability, ExecStormOfShortLivesReportsWhatItCannotName) {
  std::string err;
  double share = exec_storm("2", &err);
  RecordProperty("named_share", std::to_string(share));
  EXPECT_GT(share, 0.3) << err;
}

} // namespace
} // namespace offcpu
