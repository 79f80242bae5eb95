// End to end, as root: the real offcpu traces the blocker workload (threads
// that block in named functions) and its output is checked against what
// those threads are known to do.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

using test::FoldedLine;

constexpr double kWindow = 2.0;
constexpr uint64_t kWindowUs = 2000000;

class Workload {
public:
  explicit Workload(std::vector<std::string> args = {}) {
    args.insert(args.begin(), WORKLOAD_BLOCKER);
    proc_ = std::make_unique<test::Subprocess>(args);
    auto line = proc_->read_line(10);
    if (!line || line->rfind("ready ", 0) != 0)
      throw std::runtime_error("workload did not start");
    pid_ = std::stoi(line->substr(6));
    test::sleep_seconds(0.3); // let every thread reach its loop
  }
  int pid() const { return pid_; }
  std::set<int> tids() const {
    std::set<int> out;
    std::string dir = "/proc/" + std::to_string(pid_) + "/task";
    if (DIR *d = opendir(dir.c_str())) {
      while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
          out.insert(std::atoi(e->d_name));
      closedir(d);
    }
    return out;
  }

private:
  std::unique_ptr<test::Subprocess> proc_;
  int pid_ = 0;
};

class Profile : public test::RootTest {
protected:
  test::RunResult offcpu(std::vector<std::string> args) {
    args.insert(args.begin(), OFFCPU_BIN);
    auto r = test::run(args, 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.timed_out);
    return r;
  }

  std::vector<FoldedLine> folded(const Workload &w,
                                 std::vector<std::string> extra = {}) {
    // --no-inline: the frames these tests expect are the out-of-line ones
    // (glibc inlines its own futex_wait, a name the kernel has too).
    std::vector<std::string> args = {"-p", std::to_string(w.pid()), "-f",
                                     "--no-inline"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("2");
    return test::parse_folded(offcpu(args).out);
  }
};

const FoldedLine *heaviest_with(const std::vector<FoldedLine> &lines,
                                const std::string &comm,
                                const std::string &frame) {
  const FoldedLine *best = nullptr;
  for (const auto &l : lines)
    if (l.frames[0] == comm && test::frame_index(l, frame) >= 0 &&
        (!best || l.value > best->value))
      best = &l;
  return best;
}

// Frames appear in this order (caller before callee), not necessarily
// adjacent.
void expect_in_order(const FoldedLine *line,
                     const std::vector<std::string> &frames) {
  ASSERT_NE(line, nullptr);
  int last = -1;
  for (const auto &f : frames) {
    int at = test::frame_index(*line, f);
    EXPECT_GT(at, last) << f << " missing or out of order in: " << line->text;
    last = at;
  }
}

void expect_near(uint64_t got_us, uint64_t want_us, double tolerance,
                 const std::string &what) {
  double lo = static_cast<double>(want_us) * (1 - tolerance);
  double hi = static_cast<double>(want_us) * (1 + tolerance);
  EXPECT_GE(static_cast<double>(got_us), lo) << what;
  EXPECT_LE(static_cast<double>(got_us), hi) << what;
}

TEST_F(Profile, BlockedThreadsAddUpToTheWindowAndTheSpinnerToNearZero) {
  const char *blocked[] = {"sleeper", "piperd", "pipewr",
                           "mutexh",  "mutexw", "stuck"};
  Workload w;
  // With the state each wait began in: on a busy machine the spinner is
  // preempted (off CPU, runnable: [R]) for as long as others run, but it
  // never waits for anything itself.
  auto lines = folded(w, {"--show-state"});
  auto totals = test::totals_by_comm(lines);
  // Each of these threads is off CPU all the time but for microseconds.
  for (const char *comm : blocked)
    expect_near(totals[comm], kWindowUs, 0.05, comm);
  uint64_t spinner_waits = 0, spinner_preempted = 0;
  for (const auto &l : lines) {
    if (l.frames[0] != "spinner")
      continue;
    ASSERT_GE(l.frames.size(), 2u) << l.text;
    (l.frames[1] == "[R]" ? spinner_preempted : spinner_waits) += l.value;
  }
  RecordProperty("spinner_preempted_us", std::to_string(spinner_preempted));
  EXPECT_LT(spinner_waits, kWindowUs / 100)
      << "spinner is on CPU all the time but when preempted ("
      << spinner_preempted << " us)";
}

TEST_F(Profile, StacksNameTheBlockingFunctionsAboveTheKernelPath) {
  Workload w;
  auto lines = folded(w);
  expect_in_order(heaviest_with(lines, "sleeper", "block_in_nanosleep"),
                  {"start_thread", "sleeper_main", "block_in_nanosleep",
                   "do_syscall_64", "hrtimer_nanosleep", "do_nanosleep",
                   "schedule", "__schedule"});
  const FoldedLine *pipe = heaviest_with(lines, "piperd", "block_in_pipe_read");
  expect_in_order(pipe, {"pipe_reader_main", "block_in_pipe_read", "ksys_read",
                         "vfs_read"});
  bool pipe_path = false;
  for (const auto &f : pipe->frames)
    pipe_path |= f == "pipe_read" || f == "anon_pipe_read"; // renamed in 6.x
  EXPECT_TRUE(pipe_path) << pipe->text;
  const FoldedLine *mutex =
      heaviest_with(lines, "mutexw", "wait_for_contended_mutex");
  ASSERT_NE(mutex, nullptr);
  expect_in_order(mutex, {"mutex_waiter_main", "wait_for_contended_mutex",
                          "__x64_sys_futex", "futex_wait", "schedule"});
  expect_in_order(heaviest_with(lines, "stuck", "block_forever_in_read"),
                  {"stuck_main", "block_forever_in_read", "vfs_read"});
  EXPECT_GT(mutex->value, kWindowUs / 2)
      << "the waiter mostly waits for the mutex";
}

TEST_F(Profile, KernelStacksStartAtTheSchedulerNotTheTracer) {
  Workload w;
  for (const auto &l : folded(w)) {
    for (const auto &f : l.frames) {
      EXPECT_EQ(f.find("bpf_"), std::string::npos) << l.text;
      EXPECT_EQ(f.find("trace"), std::string::npos) << l.text;
    }
  }
}

TEST_F(Profile, ThreadBlockedForTheWholeWindowIsReported) {
  Workload w;
  auto lines = folded(w);
  const FoldedLine *stuck =
      heaviest_with(lines, "stuck", "block_forever_in_read");
  ASSERT_NE(stuck, nullptr);
  expect_near(stuck->value, kWindowUs, 0.05, stuck->text);
}

TEST_F(Profile, PidFilterExcludesOtherProcesses) {
  Workload traced, other;
  auto r = offcpu(
      {"-p", std::to_string(traced.pid()), "2"}); // text output shows tids
  std::set<int> allowed = traced.tids();
  std::set<int> forbidden = other.tids();
  size_t seen = 0;
  for (size_t pos = 0;
       (pos = r.out.find("    -                ", pos)) != std::string::npos;) {
    size_t open = r.out.find(" (", pos), close = r.out.find(")\n", pos);
    ASSERT_NE(open, std::string::npos);
    int tid = std::stoi(r.out.substr(open + 2, close - open - 2));
    EXPECT_TRUE(allowed.count(tid))
        << "tid " << tid << " is not in PID " << traced.pid();
    EXPECT_FALSE(forbidden.count(tid));
    seen++;
    pos = close;
  }
  EXPECT_GE(seen, 7u);
}

TEST_F(Profile, TidFilterTracesOneThread) {
  Workload w;
  // The "stuck" thread is the sixth created; find it by its comm.
  int stuck = -1;
  for (int tid : w.tids()) {
    auto r =
        test::run({"/bin/cat", "/proc/" + std::to_string(tid) + "/comm"}, 5);
    if (r.out == "stuck\n")
      stuck = tid;
  }
  ASSERT_GT(stuck, 0);
  auto totals = test::totals_by_comm(
      test::parse_folded(offcpu({"-t", std::to_string(stuck), "-f", "1"}).out));
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals.begin()->first, "stuck");
}

TEST_F(Profile, MinBlockTimeDropsShortWaits) {
  Workload w;
  // 150 ms: the 20 ms sleeps go, the 2 s stuck read and 200 ms pipe reads stay.
  auto totals = test::totals_by_comm(folded(w, {"-m", "150000"}));
  EXPECT_EQ(totals.count("sleeper"), 0u);
  EXPECT_GT(totals["stuck"], kWindowUs * 9 / 10);
  EXPECT_GT(totals["piperd"], 0u);
}

TEST_F(Profile, RawTracepointFallbackGivesTheSameAnswer) {
  Workload w;
  auto lines = folded(w, {"--attach", "raw_tp"});
  auto totals = test::totals_by_comm(lines);
  for (const char *comm : {"sleeper", "piperd", "stuck"})
    expect_near(totals[comm], kWindowUs, 0.05, comm);
  expect_in_order(
      heaviest_with(lines, "sleeper", "block_in_nanosleep"),
      {"sleeper_main", "block_in_nanosleep", "do_nanosleep", "__schedule"});
}

// The kernel frames of a folded line written with -d (after the "-").
std::vector<std::string> kernel_part(const FoldedLine *line) {
  std::vector<std::string> out;
  if (!line)
    return out;
  int dash = test::frame_index(*line, "-");
  if (dash >= 0)
    out.assign(line->frames.begin() + dash + 1, line->frames.end());
  return out;
}

uint64_t number_before(const std::string &text, const std::string &what) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("(\\d+) " + what)))
    return UINT64_MAX;
  return std::stoull(m[1]);
}

// The ORC walk at switch-in (the default here) must give the frames the
// kernel's own unwinder gives at switch-out, __sched ones included.
TEST_F(Profile, OrcWalkAtSwitchInGivesTheKernelsStacks) {
  Workload w;
  auto orc = folded(w, {"-d"});
  auto kernel = folded(w, {"-d", "--kernel-unwind", "switch-out"});
  struct Case {
    const char *comm, *frame;
  };
  for (Case c : {Case{"sleeper", "block_in_nanosleep"},
                 Case{"piperd", "block_in_pipe_read"},
                 Case{"mutexw", "wait_for_contended_mutex"}}) {
    auto a = kernel_part(heaviest_with(orc, c.comm, c.frame));
    auto b = kernel_part(heaviest_with(kernel, c.comm, c.frame));
    ASSERT_GE(a.size(), 4u) << c.comm;
    EXPECT_EQ(a, b) << c.comm;
    EXPECT_EQ(a.back(), "__schedule") << c.comm;
  }
  expect_in_order(heaviest_with(orc, "sleeper", "block_in_nanosleep"),
                  {"block_in_nanosleep", "hrtimer_nanosleep", "do_nanosleep",
                   "schedule", "__schedule"});
  // Blocked since before tracing began: walked at stop, in full too (the
  // kernel's bpf_get_task_stack would have dropped schedule and __schedule).
  expect_in_order(
      heaviest_with(orc, "stuck", "block_forever_in_read"),
      {"block_forever_in_read", "vfs_read", "schedule", "__schedule"});
}

TEST_F(Profile, OrcWalkAgreesWithTheKernelAndHandsOverCleanly) {
  Workload w;
  std::vector<std::string> base = {"-p", std::to_string(w.pid()), "-f", "-d",
                                   "-v"};
  auto run = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("2");
    return offcpu(args);
  };
  // Every walk checked against the kernel's own (its frames without the
  // __sched ones): none may disagree.
  auto verified = run({"--verify-kernel-unwind"});
  EXPECT_NE(verified.err.find("kernel stacks by ORC walk at switch-in"),
            std::string::npos)
      << verified.err;
  EXPECT_EQ(number_before(verified.err, "mismatches"), 0u) << verified.err;
  uint64_t checked =
      number_before(verified.err, "verified against the kernel's walk");
  EXPECT_GT(checked, 20u) << verified.err;
  EXPECT_NE(checked, UINT64_MAX) << verified.err;

  // Walks cut short after 4 frames are finished by the kernel's walk (what
  // happens at module code): same stacks.
  auto spliced = run({"--kernel-unwind-limit", "4"});
  EXPECT_EQ(number_before(spliced.err, "mismatches"), 0u) << spliced.err;
  uint64_t handed = number_before(spliced.err, "stacks finished by the kernel");
  EXPECT_GT(handed, 20u) << spliced.err;
  EXPECT_NE(handed, UINT64_MAX) << spliced.err;
  auto full = test::parse_folded(verified.out);
  auto cut = test::parse_folded(spliced.out);
  for (const char *comm : {"sleeper", "piperd"}) {
    auto a = kernel_part(heaviest_with(full, comm, "start_thread"));
    EXPECT_GE(a.size(), 5u) << comm;
    EXPECT_EQ(a, kernel_part(heaviest_with(cut, comm, "start_thread"))) << comm;
  }
}

// The split load (the default here: the light object's maps, the programs
// with plain loads verified in two threads by loaders libbpf generates),
// the light skeleton with plain loads of kernel memory alone (--loader
// light), the one with probe reads (kernels before 6.8) and libbpf's
// regular one (the fallback) run the same programs: same answers.
TEST_F(Profile, KernelAndLibbpfLoadersAgree) {
  Workload w;
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"-p", std::to_string(w.pid()), "-f", "-d",
                                     "-v"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("2");
    return offcpu(args);
  };
  auto split = run({});
  auto direct = run({"--loader", "light"});
  auto light = run({"--loader", "light-probe-reads"});
  auto regular = run({"--loader", "libbpf"});
  EXPECT_NE(split.err.find("loaded in parallel"), std::string::npos)
      << split.err;
  EXPECT_NE(split.err.find("kernel memory by plain loads"), std::string::npos)
      << split.err;
  EXPECT_NE(direct.err.find("kernel memory by plain loads"), std::string::npos)
      << direct.err;
  EXPECT_NE(direct.err.find("loaded by the kernel"), std::string::npos)
      << direct.err;
  EXPECT_NE(light.err.find("loaded by the kernel"), std::string::npos)
      << light.err;
  EXPECT_EQ(light.err.find("kernel memory by plain loads"), std::string::npos)
      << light.err;
  EXPECT_NE(regular.err.find("loaded by libbpf"), std::string::npos)
      << regular.err;
  auto sp = test::parse_folded(split.out), d = test::parse_folded(direct.out);
  auto a = test::parse_folded(light.out), b = test::parse_folded(regular.out);
  for (const char *comm : {"sleeper", "piperd", "stuck"}) {
    expect_near(test::totals_by_comm(sp)[comm], kWindowUs, 0.05, comm);
    expect_near(test::totals_by_comm(d)[comm], kWindowUs, 0.05, comm);
    expect_near(test::totals_by_comm(a)[comm], kWindowUs, 0.05, comm);
    expect_near(test::totals_by_comm(b)[comm], kWindowUs, 0.05, comm);
    auto want = kernel_part(heaviest_with(b, comm, "start_thread"));
    EXPECT_EQ(kernel_part(heaviest_with(sp, comm, "start_thread")), want)
        << comm;
    EXPECT_EQ(kernel_part(heaviest_with(d, comm, "start_thread")), want)
        << comm;
    EXPECT_EQ(kernel_part(heaviest_with(a, comm, "start_thread")), want)
        << comm;
  }
}

// A load the probes chose that then fails falls back with one warning line
// by default: what failed and why, what loaded instead, what that costs
// (--fail-load makes the kernel refuse the load named: a map too large).
// The fallback still gives the right answer.
TEST_F(Profile, FailedLoadWarnsOnceAndFallsBack) {
  Workload w;
  struct Case {
    std::vector<std::string> args;
    std::string failed, loaded, cost;
  };
  const std::vector<Case> cases = {
      {{"--wakers", "--fail-load", "split"},
       "the split load (",
       "loaded the light object with plain loads instead",
       "the programs verified one after the other"},
      {{"--fail-load", "light"},
       "the light BPF object with plain loads (",
       "loaded the light object with probe reads instead",
       "stacks checked by probe reads"},
      {{"--fail-load", "light,light-probe-reads"},
       "the light BPF object with probe reads (",
       "loaded libbpf's tp_btf plan instead",
       "libbpf parses the kernel's BTF"},
      {{"--loader", "libbpf", "--fail-load", "tp_btf"},
       "libbpf's tp_btf plan (",
       "loaded libbpf's raw_tp plan instead",
       "kernel stacks walked at every switch-out"},
  };
  for (const Case &c : cases) {
    std::vector<std::string> args = {"-p", std::to_string(w.pid()), "-f"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.push_back("2");
    auto r = offcpu(args);
    std::vector<std::string> warnings;
    std::istringstream err(r.err);
    for (std::string line; std::getline(err, line);)
      if (line.find("failed to load") != std::string::npos)
        warnings.push_back(line);
    ASSERT_EQ(warnings.size(), 1u) << r.err;
    const std::string &line = warnings[0];
    EXPECT_EQ(line.rfind("offcpu: warning: ", 0), 0u) << line;
    for (const std::string &part : {c.failed, c.loaded, c.cost})
      EXPECT_NE(line.find(part), std::string::npos) << part << "\n" << line;
    EXPECT_NE(line.find("Argument list too long"), std::string::npos) << line;
    auto totals = test::totals_by_comm(test::parse_folded(r.out));
    expect_near(totals["sleeper"], kWindowUs, 0.05, "sleeper");
  }
}

// The split load's two objects load through loaders libbpf generates at
// run time, rewritten to take the light object's maps; --fail-load
// generated loads them by libbpf instead, as where that loader is not the
// shape expected. Either way the same answer and no warning, with one hook
// and with two. The window edges' iterators load the same way while the
// hooks run: the stuck thread, blocked since before the start, gets its
// stack from them (SeededWaits.TheEdgesLoadLeavesTheLiveDataAsItIs checks
// that their load leaves the live .bss as it is).
TEST_F(Profile, SplitLoadThroughGeneratedLoadersOrLibbpf) {
  Workload w;
  for (bool wakers : {false, true}) {
    for (bool generated : {true, false}) {
      std::vector<std::string> args = {"-v", "-p", std::to_string(w.pid()),
                                       "-f", "--no-inline"};
      if (wakers)
        args.push_back("--wakers");
      if (!generated)
        args.insert(args.end(), {"--fail-load", "generated"});
      args.push_back("2");
      const std::string what = std::string(wakers ? "--wakers, " : "") +
                               (generated ? "generated" : "libbpf");
      auto r = offcpu(args);
      const std::string how = generated ? "(generated loader, generated loader)"
                                        : "(libbpf, libbpf)";
      EXPECT_NE(r.err.find("split load: "), std::string::npos) << what << "\n"
                                                               << r.err;
      EXPECT_NE(r.err.find(how), std::string::npos) << what << "\n" << r.err;
      const std::string edges =
          std::string("the window edges' iterators loaded (") +
          (generated ? "generated loader" : "libbpf") + ")";
      EXPECT_NE(r.err.find(edges), std::string::npos) << what << "\n" << r.err;
      EXPECT_EQ(r.err.find("failed to load"), std::string::npos) << what << "\n"
                                                                 << r.err;
      auto lines = test::parse_folded(r.out);
      auto totals = test::totals_by_comm(lines);
      expect_near(totals["sleeper"], kWindowUs, 0.05, "sleeper, " + what);
      expect_near(totals["stuck"], kWindowUs, 0.05, "stuck, " + what);
      expect_in_order(heaviest_with(lines, "sleeper", "block_in_nanosleep"),
                      {"start_thread", "sleeper_main", "block_in_nanosleep",
                       "do_syscall_64", "hrtimer_nanosleep", "schedule"});
      expect_in_order(heaviest_with(lines, "stuck", "block_forever_in_read"),
                      {"stuck_main", "block_forever_in_read", "vfs_read"});
    }
  }
}

// Fallbacks the probes chose, or the user, are no failures: no warning.
TEST_F(Profile, ChosenPlansDoNotWarn) {
  Workload w;
  for (std::vector<std::string> extra : {std::vector<std::string>{},
                                         {"--attach", "raw_tp"},
                                         {"--wakers"},
                                         {"--loader", "light", "--wakers"},
                                         {"--loader", "light-probe-reads"},
                                         {"--loader", "libbpf"}}) {
    std::vector<std::string> args = {"-p", std::to_string(w.pid()), "-f"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("1");
    auto r = offcpu(args);
    EXPECT_EQ(r.err.find("failed to load"), std::string::npos) << r.err;
  }
}

TEST_F(Profile, KernelUnwindOrcRefusedWithRawTp) {
  auto r = test::run(
      {OFFCPU_BIN, "--attach", "raw_tp", "--kernel-unwind", "orc", "-f", "1"},
      30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kernel-unwind orc is not possible"),
            std::string::npos)
      << r.err;
}

TEST_F(Profile, StackSelectionAndDelimiter) {
  Workload w;
  auto user_only = folded(w, {"-U"});
  for (const auto &l : user_only)
    EXPECT_EQ(test::frame_index(l, "do_syscall_64"), -1) << l.text;
  auto kernel_only = folded(w, {"-K"});
  for (const auto &l : kernel_only)
    EXPECT_EQ(test::frame_index(l, "start_thread"), -1) << l.text;
  auto delimited = folded(w, {"-d"});
  const FoldedLine *s =
      heaviest_with(delimited, "sleeper", "block_in_nanosleep");
  expect_in_order(s, {"block_in_nanosleep", "-", "do_syscall_64"});
}

TEST_F(Profile, SigintPrintsEverythingCollected) {
  for (int sig : {SIGINT, SIGTERM}) {
    Workload w;
    test::Subprocess p({OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f"});
    test::sleep_seconds(1.5);
    double sent = test::now_seconds();
    p.signal(sig);
    auto r = p.wait(30);
    EXPECT_LT(test::now_seconds() - sent, 10.0);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto lines = test::parse_folded(r.out);
    auto totals = test::totals_by_comm(lines);
    // Tracing began some time after the spawn; the stuck thread saw it all.
    EXPECT_GT(totals["stuck"], 500000u) << r.out;
    EXPECT_LT(totals["stuck"], 1600000u) << r.out;
    expect_near(totals["sleeper"], totals["stuck"], 0.05,
                "both blocked all the window");
  }
}

TEST_F(Profile, ClosedPipeEndsQuietly) {
  Workload w;
  test::Subprocess::Options closed;
  closed.stdout_to_closed_pipe = true;
  auto r = test::run({OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f", "1"}, 30,
                     closed);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

TEST_F(Profile, LossesAreCountedAndNameTheOptionThatFixesThem) {
  Workload w;
  auto tiny_stacks = test::run({OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f",
                                "--stack-storage-size", "2", "1"},
                               60);
  EXPECT_EQ(tiny_stacks.exit_code, 0) << tiny_stacks.err;
  // By default in the one summary line, with its share of the time; the
  // loss's own line is -v's.
  EXPECT_TRUE(std::regex_search(
      tiny_stacks.err,
      std::regex("warning: [0-9.<]+% of the off-CPU time is on stacks that "
                 "are not whole: [^\\n]*[0-9.<]+% stack storage full "
                 "\\(\\d+ stacks\\): raise --stack-storage-size to 8 "
                 "\\(now 2\\)")))
      << tiny_stacks.err;
  EXPECT_EQ(tiny_stacks.err.find("stacks lost ("), std::string::npos)
      << tiny_stacks.err;
  // The waits whose stacks were lost are still counted, with a marker.
  EXPECT_NE(tiny_stacks.out.find("[Missed"), std::string::npos);
  auto tiny_map = test::run({OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f",
                             "--max-entries", "2", "1"},
                            60);
  EXPECT_EQ(tiny_map.exit_code, 0) << tiny_map.err;
  EXPECT_NE(tiny_map.err.find("raise --max-entries (now 2)"), std::string::npos)
      << tiny_map.err;
  // Two keys; the waits that found no room are summed per thread name,
  // without stacks.
  size_t keyed = 0;
  for (const auto &l : test::parse_folded(tiny_map.out))
    keyed += !(l.frames.size() == 3 && l.frames[1] == "[Missed User Stack]" &&
               l.frames[2] == "[Missed Kernel Stack]");
  EXPECT_LE(keyed, 2u) << tiny_map.out;
}

TEST_F(Profile, ShortLivedProcessesKeepTheirFrames) {
  // 300 processes, each blocked 40 ms in block_briefly(), all gone long
  // before tracing ends.
  test::Subprocess tracer({OFFCPU_BIN, "-f", "5"});
  test::sleep_seconds(0.5);
  auto wl = test::run({WORKLOAD_SHORT_LIVED, "300"}, 60);
  ASSERT_EQ(wl.exit_code, 0);
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t total = 0, named = 0;
  for (const auto &l : test::parse_folded(r.out)) {
    if (l.frames[0] != "slchild")
      continue;
    total += l.value;
    int at = test::frame_index(l, "block_briefly");
    if (at >= 0 && test::frame_index(l, "child_main") == at - 1)
      named += l.value;
  }
  ASSERT_GT(total, 300u * 40000 * 9 / 10)
      << "the children's waits were not seen";
  double coverage = static_cast<double>(named) / static_cast<double>(total);
  std::cerr << "short-lived coverage: " << 100 * coverage << "% of " << total
            << " us\n";
  EXPECT_GE(coverage, 0.99);
}

// The same with a library each child loads after its first wait and
// sleeps in before exiting: a stack in code its maps did not hold when it
// was first announced reaches user space while the process lives, though
// a known process's new stacks otherwise wait for the next poll.
TEST_F(Profile, ShortLivedProcessesKeepFramesOfLibrariesLoadedLate) {
  test::Subprocess tracer({OFFCPU_BIN, "-f", "4"});
  test::sleep_seconds(0.5);
  auto wl = test::run({WORKLOAD_SHORT_LIVED, "100", WORKLOAD_LATE_LIB}, 60);
  ASSERT_EQ(wl.exit_code, 0) << wl.err;
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t late = 0;
  std::map<std::string, uint64_t> leaves; // of the other children's waits
  for (const auto &l : test::parse_folded(r.out)) {
    if (l.frames[0] != "slchild")
      continue;
    int at = test::frame_index(l, "late_lib_nap");
    if (at >= 0 && test::frame_index(l, "child_main") == at - 1)
      late += l.value;
    else if (test::frame_index(l, "block_briefly") < 0)
      leaves[l.frames.size() > 1 ? l.frames[1] : ""] += l.value;
  }
  std::string others;
  for (const auto &[frame, us] : leaves)
    others += " " + frame + ": " + std::to_string(us) + " us;";
  // 100 naps of 20 ms; dlopen's own waits (page faults) are others.
  EXPECT_GE(late, 100u * 20000 * 95 / 100) << "other waits:" << others;
}

// Two offcpu at once, one whole-system and one on the workload, as two
// engineers on one host would run them: each has maps and programs of its
// own, so each sees the whole window with whole stacks, and each switch
// hook runs as often as the other (one run of four instances at once on a
// loaded host once showed one hook running twice as often, with most of
// its user walks taken before any table).
TEST_F(Profile, TwoInstancesAtOnceEachSeeTheWholeWindow) {
  Workload w;
  const std::string pid = std::to_string(w.pid());
  test::Subprocess whole({OFFCPU_BIN, "-f", "--no-inline", "-v",
                          "--stack-storage-size", "65536", "2"});
  test::Subprocess one({OFFCPU_BIN, "-p", pid, "-f", "--no-inline", "-v", "2"});
  std::vector<test::RunResult> runs = {whole.wait(60), one.wait(60)};
  std::vector<uint64_t> hook_runs;
  for (const test::RunResult &r : runs) {
    SCOPED_TRACE(&r == &runs[0] ? "whole system" : "-p");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lines = test::parse_folded(r.out);
    // The workload's thread names are its own on this host.
    auto totals = test::totals_by_comm(lines);
    for (const char *comm : {"sleeper", "piperd", "stuck"})
      expect_near(totals[comm], kWindowUs, 0.05, comm);
    expect_in_order(heaviest_with(lines, "sleeper", "block_in_nanosleep"),
                    {"start_thread", "sleeper_main", "block_in_nanosleep",
                     "do_nanosleep", "schedule"});
    std::smatch m;
    static const std::regex kHook(
        R"(BPF program offcpu_switch_b\w*: (\d+) runs)");
    ASSERT_TRUE(std::regex_search(r.err, m, kHook)) << r.err;
    hook_runs.push_back(std::stoull(m[1]));
  }
  // Both hooks see every switch of the host while both are attached: the
  // windows overlap but for the start-up of each.
  const double ratio = static_cast<double>(hook_runs[0]) /
                       static_cast<double>(std::max<uint64_t>(hook_runs[1], 1));
  EXPECT_GT(ratio, 0.5) << hook_runs[0] << " vs " << hook_runs[1];
  EXPECT_LT(ratio, 2.0) << hook_runs[0] << " vs " << hook_runs[1];
}

TEST_F(Profile, WholeSystemTraceSeesKernelThreadsAndOurs) {
  Workload w;
  auto r = offcpu({"-f", "1"});
  auto totals = test::totals_by_comm(test::parse_folded(r.out));
  EXPECT_GT(totals["stuck"], 900000u);
  bool kthread = false;
  for (const auto &[comm, us] : totals)
    kthread |= comm.rfind("kworker", 0) == 0 || comm.rfind("rcu_", 0) == 0 ||
               comm.rfind("ksoftirqd", 0) == 0;
  EXPECT_TRUE(kthread);
  auto kernel_threads =
      test::totals_by_comm(test::parse_folded(offcpu({"-k", "-f", "1"}).out));
  EXPECT_EQ(kernel_threads.count("stuck"), 0u);
  auto user_threads =
      test::totals_by_comm(test::parse_folded(offcpu({"-u", "-f", "1"}).out));
  EXPECT_GT(user_threads["stuck"], 900000u);
}

// A whole-system run traces offcpu too. Its own frames are named by its
// symbol table: its DWARF (39 MB in a RelWithDebInfo build) was a third of
// such a run's peak RSS (issue #27). The main thread's loop, blocked in
// every run, is named by its function.
TEST_F(Profile, WholeSystemTraceNamesOffcpuByItsSymbols) {
  test::Subprocess tracer({OFFCPU_BIN, "--per-pid", "-v", "-f", "1"});
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string own = "offcpu-" + std::to_string(tracer.pid()) + ";";
  bool loop_named = false;
  size_t pos = 0;
  while ((pos = r.out.find(own, pos)) != std::string::npos) {
    size_t end = r.out.find('\n', pos);
    loop_named |= r.out.substr(pos, end - pos).find("offcpu::run_profile(") !=
                  std::string::npos;
    pos = end;
  }
  EXPECT_TRUE(loop_named) << r.out;
  EXPECT_NE(r.err.find("offcpu's own frames by its symbols only"),
            std::string::npos)
      << r.err;
}

} // namespace
} // namespace offcpu
