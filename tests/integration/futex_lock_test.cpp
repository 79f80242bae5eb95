// `offcpu lock --futex` end to end, as root, against a workload of our own
// (tests/workloads/futex_contend.c): worker threads contend one global
// pthread mutex, each holding it asleep for a known time in a named
// function. The wait is named by the mutex's symbol (big_lock, pi_lock)
// under the kind futex or futex:pi; its total agrees with a bpftrace script
// summing the same futex calls over the same window and with the
// workload's own measure of its waits; the holder is another worker.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "support/bpftrace_total.h"
#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class FutexLock : public test::RootTest {};

// The workload, with the futex word's address and its own running total.
class Contender {
public:
  explicit Contender(const std::string &mode) {
    proc_ = std::make_unique<test::Subprocess>(
        std::vector<std::string>{WORKLOAD_FUTEX_CONTEND, mode, "4", "2000"});
    auto line = proc_->read_line(10);
    std::smatch m;
    if (!line ||
        !std::regex_match(*line, m, std::regex("ready (\\d+) (0x[0-9a-f]+)")))
      throw std::runtime_error("futex_contend did not start");
    pid_ = std::stoi(m[1]);
    word_ = m[2];
  }
  int pid() const { return pid_; }
  const std::string &word() const { return word_; }

  // Its "W NOW WAITED" lines, once it is stopped.
  std::string stop() {
    proc_->signal(SIGKILL);
    return proc_->wait(30).out;
  }

private:
  std::unique_ptr<test::Subprocess> proc_;
  int pid_ = 0;
  std::string word_;
};

// bpftrace's time of the workload's threads in futex calls that wait
// (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2, with or without
// FUTEX_PRIVATE_FLAG) on its lock's word, entry to exit.
std::string futex_waits_script(int pid, const std::string &word) {
  return "tracepoint:syscalls:sys_enter_futex /pid == " + std::to_string(pid) +
         " && args->uaddr == " + word +
         " && ((args->op & 127) == 0 || (args->op & 127) == 9 || "
         "(args->op & 127) == 6 || (args->op & 127) == 13)/ "
         "{ @s[tid] = nsecs; }\n"
         "tracepoint:syscalls:sys_exit_futex /@s[tid]/ "
         "{ @t = @t + (nsecs - @s[tid]); delete(@s[tid]); }\n";
}

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// The kind and lock frames: the last two, or the two before a "--".
std::pair<std::string, std::string> kind_and_lock(const test::FoldedLine &l) {
  int end = test::frame_index(l, "--");
  size_t n = end >= 0 ? static_cast<size_t>(end) : l.frames.size();
  if (n < 2)
    return {};
  return {l.frames[n - 2], l.frames[n - 1]};
}

// A contended global pthread_mutex_t: its waits are named big_lock, in
// take_big_lock; their total is bpftrace's (the same futex calls, entry to
// exit) and the workload's own (around pthread_mutex_lock), within
// margins: offcpu counts only the time asleep.
TEST_F(FutexLock, GlobalMutexNamedAndTotalsAgree) {
  if (auto why = test::bpftrace_unavailable("syscalls"); !why.empty())
    GTEST_SKIP() << why;
  Contender w("mutex");
  test::BpftraceTotal bpftrace(futex_waits_script(w.pid(), w.word()));
  ASSERT_TRUE(bpftrace.attached()) << "bpftrace did not start";
  auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                         "--futex", "-Y", "futex", "-v", "-f", "3"},
                        60);
  double bpftrace_us = bpftrace.us_between(ours.err);
  std::string own = w.stop();
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  uint64_t from = 0, to = 0;
  ASSERT_TRUE(test::window_of(ours.err, from, to)) << ours.err;
  auto lines = test::parse_folded(ours.out);
  ASSERT_FALSE(lines.empty()) << ours.err;
  double named_us = 0, all_us = 0;
  for (const auto &l : lines) {
    auto [kind, lock] = kind_and_lock(l);
    EXPECT_EQ(kind, "futex") << l.text;
    all_us += static_cast<double>(l.value);
    if (lock == "big_lock" && test::frame_index(l, "take_big_lock") >= 0)
      named_us += static_cast<double>(l.value);
  }
  // Nearly all of it: the main thread's own sleeps are no futex waits.
  EXPECT_GT(named_us, all_us * 0.9) << ours.out;
  double own_us = test::growth_us(own, "W", from, to);
  std::cerr << "big_lock waits: offcpu " << named_us << " us, bpftrace "
            << bpftrace_us << " us, workload " << own_us << " us\n";
  // 4 workers, each asleep holding it 2 ms of every 2.5: seconds of waits.
  EXPECT_GT(bpftrace_us, 1e6);
  EXPECT_NEAR(named_us, bpftrace_us, bpftrace_us * 0.2);
  EXPECT_NEAR(named_us, own_us, own_us * 0.25);
}

// A PTHREAD_PRIO_INHERIT mutex: FUTEX_LOCK_PI, kind futex:pi, pi_lock; its
// rt_mutex contention inside the call is not counted again as rtmutex.
// The text report names the holder, another worker.
TEST_F(FutexLock, PiMutexAndItsHolder) {
  Contender w("pi");
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                      "--futex", "-v", "-o", dir_ + "/out.folded", "-o",
                      dir_ + "/out.txt", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(read_file(dir_ + "/out.folded"));
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t pi = 0;
  for (const auto &l : lines) {
    auto [kind, lock] = kind_and_lock(l);
    EXPECT_NE(kind, "rtmutex") << l.text;
    if (kind == "futex:pi" && lock == "pi_lock" &&
        test::frame_index(l, "take_big_lock") >= 0)
      pi += l.value;
  }
  EXPECT_GT(pi, 500000u) << read_file(dir_ + "/out.folded");
  std::string text = read_file(dir_ + "/out.txt");
  EXPECT_TRUE(std::regex_search(
      text, std::regex("us  futex:pi +pi_lock +take_big_lock\n")))
      << text;
  EXPECT_TRUE(std::regex_search(
      text, std::regex("top holder fc_worker \\(\\d+\\): woke waits of")))
      << text;
}

// --wakers: the holder's stacks after a "--" frame, its comm last: a worker
// releasing the lock in pthread_mutex_unlock's futex wake.
TEST_F(FutexLock, HolderStacksWithWakers) {
  Contender w("mutex");
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "futex", "--wakers", "-f", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t by_worker = 0, total = 0;
  for (const auto &l : lines) {
    total += l.value;
    int delim = test::frame_index(l, "--");
    bool in_worker =
        delim >= 0 && std::find(l.frames.begin() + delim, l.frames.end(),
                                "worker") != l.frames.end();
    if (kind_and_lock(l).second == "big_lock" && in_worker &&
        l.frames.back() == "fc_worker")
      by_worker += l.value;
  }
  EXPECT_GT(by_worker, total * 8 / 10) << r.out;
}

// The handoff_word waits of each report in `out` (text, its intervals in
// order).
std::vector<uint64_t> handoff_counts(const std::string &out) {
  std::vector<uint64_t> counts;
  std::istringstream in(out);
  const std::regex header("^\\[\\d\\d:\\d\\d:\\d\\d\\] lock waits over");
  const std::regex row("^ *(\\d+) +\\d+ us +\\d+ us +\\d+ us +futex +"
                       "handoff_word ");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, header))
      counts.push_back(0);
    else if (!counts.empty() && std::regex_search(line, m, row))
      counts.back() += std::stoull(m[1]);
  }
  return counts;
}

// A futex wait ended by its timeout has no holder: nobody released it.
// The timer's interrupt finds some task running (a spinning thread of the
// workload, offcpu itself, the idle task), which was named as the holder
// without --wakers.
TEST_F(FutexLock, TimedOutWaitsNameNoHolder) {
  auto r = test::run({OFFCPU_BIN, "lock", "-Y", "futex", "-v", "--",
                      WORKLOAD_FUTEX_CONTEND, "timeout", "300", "2000"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex row("^ *(\\d+) +\\d+ us +\\d+ us +\\d+ us +(\\S+) +(\\S+)");
  std::istringstream in(r.out);
  bool in_timeouts = false;
  uint64_t waits = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      in_timeouts = m[3] == "timeout_word";
      if (in_timeouts)
        waits += std::stoull(m[1]);
    } else if (in_timeouts) {
      EXPECT_EQ(line.find("top holder"), std::string::npos) << r.out;
    }
  }
  // Nearly all: with both CPUs spun on, a wait's timer may fire while its
  // thread is preempted before it sleeps (off CPU runnable, no futex sleep).
  EXPECT_GE(waits, 270u) << r.out;
  EXPECT_LE(waits, 300u) << r.out;
}

// A thread's latest futex waits are added up in its task storage until
// they reach the totals' map (futex.bpf.h): none may be lost with it. The
// waiter sleeps exactly 20 times, then exits; so does the process, which
// ends the run: its waits are reported from its exit.
TEST_F(FutexLock, WaitsOfAnExitedThreadAllReported) {
  auto r = test::run({OFFCPU_BIN, "lock", "-Y", "futex", "--",
                      WORKLOAD_FUTEX_CONTEND, "handoff", "20", "1000", "exit",
                      "200"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(handoff_counts(r.out), std::vector<uint64_t>{20}) << r.out;
}

// The same waits with -i: all in the interval they were in (the waiter
// then idles), none in a later one; and, in a window that ends while the
// waiter is still there, at the end.
TEST_F(FutexLock, WaitsReportedInTheirIntervalAndAtTheEnd) {
  auto r = test::run({OFFCPU_BIN, "lock", "-Y", "futex", "-i", "1", "2.5", "--",
                      WORKLOAD_FUTEX_CONTEND, "handoff", "20", "1000", "idle",
                      "10000"},
                     60);
  // The command, still running at the window's end, is ended.
  ASSERT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  std::vector<uint64_t> counts = handoff_counts(r.out);
  ASSERT_EQ(counts.size(), 3u) << r.out;
  EXPECT_EQ(counts, (std::vector<uint64_t>{20, 0, 0})) << r.out;

  r = test::run({OFFCPU_BIN, "lock", "-Y", "futex", "1", "--",
                 WORKLOAD_FUTEX_CONTEND, "handoff", "20", "1000", "idle",
                 "10000"},
                60);
  ASSERT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(handoff_counts(r.out), std::vector<uint64_t>{20}) << r.out;
}

} // namespace
} // namespace offcpu
