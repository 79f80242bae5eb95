// `offcpu lock` per kind of kernel lock, end to end, as root, against
// tests/workloads/lock_kinds.c: a semaphore (console_sem), both sides of a
// percpu_rw_semaphore (dup_mmap_sem), a rw_semaphore's read side (a
// directory's i_rwsem) and the rt_mutex of a PI futex. Per kind, the total
// is compared with every wait bpftrace saw on the same tracepoints, clipped
// to offcpu's window. Then what the text, folded and pprof outputs carry:
// intervals, --by rows, the formats, the lock's owner in pprof.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// A workload that prints "ready PID" once set up; exit status 3 (with its
// reason on stderr) when the machine lacks what it needs.
class Workload {
public:
  explicit Workload(std::vector<std::string> args)
      : proc_(std::make_unique<test::Subprocess>(args)) {
    auto line = proc_->read_line(20);
    if (line && line->rfind("ready ", 0) == 0) {
      pid_ = std::stoi(line->substr(6));
      return;
    }
    auto r = proc_->wait(5);
    missing_ = r.exit_code == 3 ? r.err : "";
    if (missing_.empty())
      throw std::runtime_error("workload did not start: " + args[0] + " " +
                               args[1] + ": " + r.err);
  }
  int pid() const { return pid_; }
  // Why the workload cannot run here; empty when it runs.
  const std::string &missing() const { return missing_; }

private:
  std::unique_ptr<test::Subprocess> proc_;
  int pid_ = 0;
  std::string missing_;
};

// The perf events a process holds open (bpftrace: one per attached probe).
int perf_events(int pid) {
  return test::fds_linking_to(pid, "anon_inode:[perf_event]");
}

bool ensure_tracefs() {
  if (access("/sys/kernel/tracing/events/lock", F_OK) == 0)
    return true;
  mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr);
  return access("/sys/kernel/tracing/events/lock", F_OK) == 0;
}

// Waits shorter than this are summed in bpftrace's maps, by the 5 ms
// slice of time they began in, rather than printed one by one: a printf
// at contention_end costs bpftrace microseconds, which lie inside the wait
// as offcpu times it (its program runs after bpftrace's), as long as a
// spinning wait itself. Longer waits are printed, each with its length.
constexpr uint64_t kShortWaitNs = 1000000;
constexpr uint64_t kSliceNs = 5000000;
// A wait bpftrace holds open while the same thread begins another of the
// same kind on another lock is one whose end it did not see, once it is
// this old: a thread sleeping for a lock begins nothing, and a spinning
// one's nested contention (an interrupt's spinlock) lasts microseconds.
// Seen on the 6.18 VM while offcpu attached its programs to the same
// tracepoints: bpftrace (perf events, with their own recursion guards)
// missed a few hundred contention_end events of each thread, and one
// thread whose missed end was of a lock it never contended again stayed
// "open" for the whole run, its waits (1/8 of the workload's) all
// ignored, in one run in 10. Such a wait is dropped (its length is
// unknown) and counted, and the new one begins.
constexpr uint64_t kStaleWaitNs = 10000000;

// Every wait of process `pid` whose lock:contention_begin flags are
// `flags`, as bpftrace sees it: its begin and end, from the begin to the
// contention_end of the same lock, or to a begin of the same lock with
// other flags (a mutex waiter going from spinning to sleeping and back:
// each phase is its own kind); ends of other locks, nested contentions,
// are not its end. offcpu lock's rule too. Written to a file (-o) so that
// a busy kind cannot fill a pipe and lose events.
class BpftraceWaits {
public:
  BpftraceWaits(const std::string &dir, int pid, unsigned flags)
      : path_(dir + "/bpftrace-" + std::to_string(flags) + ".out") {
    const std::string who = "pid == " + std::to_string(pid);
    const std::string mine = std::to_string(flags);
    const std::string slice = "@s[tid] / " + std::to_string(kSliceNs);
    const std::string end =
        "{ $d = nsecs - @s[tid]; if ($d < " + std::to_string(kShortWaitNs) +
        ") { @n[" + slice + "] = count(); @t[" + slice +
        "] = sum($d); } else { printf(\"W %llu %llu\\n\", @s[tid], "
        "@s[tid] + $d); } delete(@s[tid]); delete(@l[tid]); }\n";
    const std::string script =
        "tracepoint:lock:contention_begin /@s[tid] && @l[tid] == "
        "(uint64)args->lock_addr && args->flags != " +
        mine + "/ " + end + "tracepoint:lock:contention_begin /" + who +
        " && args->flags == " + mine +
        " && @s[tid] && @l[tid] != (uint64)args->lock_addr && nsecs - "
        "@s[tid] > " +
        std::to_string(kStaleWaitNs) +
        "/ { @stale = count(); delete(@s[tid]); delete(@l[tid]); }\n"
        "tracepoint:lock:contention_begin /" +
        who + " && args->flags == " + mine +
        " && !@s[tid]/ { @s[tid] = nsecs; @l[tid] = "
        "(uint64)args->lock_addr; }\n"
        "tracepoint:lock:contention_end /@s[tid] && @l[tid] == "
        "(uint64)args->lock_addr/ " +
        end +
        "interval:ms:50 { printf(\"T\\n\"); }\n"
        "END { print(@s); print(@n); print(@t); clear(@s); clear(@l); "
        "clear(@n); clear(@t); }\n";
    proc_ = std::make_unique<test::Subprocess>(std::vector<std::string>{
        "/usr/bin/bpftrace", "-o", path_, "-e", script});
    // Its file is written in blocks: attached once it holds a perf event
    // per probe (the two tracepoints and the interval).
    for (double t0 = test::now_seconds();
         !attached_ && test::now_seconds() - t0 < 60; test::sleep_seconds(0.05))
      attached_ = perf_events(proc_->pid()) >= 3;
  }
  bool attached() const { return attached_; }

  // Stops bpftrace and keeps the waits that began in offcpu's window (its
  // -v line "traced from A to B ns"), each up to its end or B, where
  // offcpu's stop charges it (the short ones, summed by slice: those of
  // the slices that begin in the window). False without the line. Events
  // bpftrace lost fail the comparison.
  bool finish(const std::string &offcpu_err) {
    test::sleep_seconds(0.3);
    proc_->signal(SIGINT);
    auto r = proc_->wait(60);
    EXPECT_EQ(r.err.find("Lost"), std::string::npos) << r.err;
    std::smatch w;
    if (!std::regex_search(offcpu_err, w,
                           std::regex("traced from (\\d+) to (\\d+) ns")))
      return false;
    const uint64_t from = std::stoull(w[1]), to = std::stoull(w[2]);
    const std::string out = read_file(path_);
    EXPECT_EQ(out.find("Lost"), std::string::npos) << "bpftrace lost events";
    std::smatch m;
    if (std::regex_search(out, m, std::regex("@stale: ([1-9]\\d*)")))
      std::cerr << "bpftrace: " << m[1]
                << " waits dropped, their end not seen\n";
    std::istringstream in(out);
    std::string line;
    const std::regex done("W (\\d+) (\\d+)"), open("@s\\[\\d+\\]: (\\d+)"),
        summed("@([nt])\\[(\\d+)\\]: (\\d+)");
    while (std::getline(in, line)) {
      uint64_t begin = 0, end = to; // still open at bpftrace's end
      if (std::regex_match(line, m, summed)) {
        const uint64_t slice = std::stoull(m[2]) * kSliceNs;
        if (slice >= from && slice < to)
          (m[1] == "n" ? short_waits_ : short_ns_) += std::stoull(m[3]);
        continue;
      }
      if (std::regex_match(line, m, done)) {
        begin = std::stoull(m[1]);
        end = std::min<uint64_t>(std::stoull(m[2]), to);
      } else if (std::regex_match(line, m, open)) {
        begin = std::stoull(m[1]);
      } else {
        continue;
      }
      if (begin >= from && begin < end)
        ns_.push_back(end - begin);
    }
    return true;
  }
  // The kept waits of at least `min_ns` and at most `max_ns`: their time
  // in us, their number. The short ones are known only as a sum: limits
  // must not fall among them.
  double us(uint64_t min_ns = 0, uint64_t max_ns = UINT64_MAX) const {
    uint64_t sum = with_short(min_ns, max_ns) ? short_ns_ : 0;
    for (uint64_t ns : ns_)
      if (ns >= min_ns && ns <= max_ns)
        sum += ns;
    return static_cast<double>(sum) / 1000.0;
  }
  int waits(uint64_t min_ns = 0, uint64_t max_ns = UINT64_MAX) const {
    return static_cast<int>(
        (with_short(min_ns, max_ns) ? short_waits_ : 0) +
        std::count_if(ns_.begin(), ns_.end(), [&](uint64_t ns) {
          return ns >= min_ns && ns <= max_ns;
        }));
  }

  // finish(), then the time of every kept wait in us; -1 without the line.
  double us_in_window(const std::string &offcpu_err) {
    return finish(offcpu_err) ? us() : -1;
  }

private:
  static bool with_short(uint64_t min_ns, uint64_t max_ns) {
    EXPECT_TRUE(min_ns == 0 || min_ns >= kShortWaitNs) << min_ns;
    EXPECT_GE(max_ns, kShortWaitNs);
    return min_ns == 0;
  }

  std::string path_;
  std::unique_ptr<test::Subprocess> proc_;
  bool attached_ = false;
  std::vector<uint64_t> ns_; // each kept wait's length
  uint64_t short_waits_ = 0, short_ns_ = 0;
};

const std::string &kind_of(const test::FoldedLine &l) {
  return l.frames[l.frames.size() - 2];
}

class LockKinds : public test::RootTest {
protected:
  void SetUp() override {
    test::RootTest::SetUp();
    if (IsSkipped())
      return;
    if (access("/usr/bin/bpftrace", X_OK) != 0)
      GTEST_SKIP() << "bpftrace (Debian package bpftrace) is not installed";
    if (!ensure_tracefs())
      GTEST_SKIP() << "tracefs cannot be mounted; bpftrace needs it";
  }

  // offcpu lock -Y each of `kinds` over `w` for 3 s beside a bpftrace per
  // kind (its contention_begin flags); per kind, offcpu counts bpftrace's
  // waits (within 10%), its total agrees within 20% (plus
  // `slack_us_per_wait` a wait), and every stack holds `function` (if
  // given). bpftrace's programs run first on each tracepoint (attached
  // first), so its waits also hold offcpu's work at their begin (its
  // stack walks: offcpu times a wait from their end): the time that
  // offcpu -v reports its begin program took, each run, is added to
  // offcpu's side per wait. Returns the folded lines.
  std::vector<test::FoldedLine>
  agree(const Workload &w,
        const std::vector<std::pair<std::string, unsigned>> &kinds,
        const std::string &function, int min_waits = 10,
        double slack_us_per_wait = 0) {
    std::vector<std::unique_ptr<BpftraceWaits>> theirs;
    std::string names;
    for (const auto &[kind, flags] : kinds) {
      theirs.push_back(std::make_unique<BpftraceWaits>(dir_, w.pid(), flags));
      EXPECT_TRUE(theirs.back()->attached()) << "bpftrace did not start";
      names += (names.empty() ? "" : ",") + kind;
    }
    const std::string folded = dir_ + "/lock.folded", txt = dir_ + "/lock.txt";
    auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                           "-Y", names, "-v", "-o", folded, "-o", txt, "3"},
                          90);
    EXPECT_EQ(ours.exit_code, 0) << ours.err;
    auto lines = test::parse_folded(read_file(folded));
    // The first program listed is the one that begins waits.
    std::smatch cost;
    EXPECT_TRUE(std::regex_search(
        ours.err, cost,
        std::regex("BPF program (\\S+): (\\d+) runs, (\\d+) ns each")))
        << ours.err;
    const double begin_us = cost.empty() ? 0 : std::stod(cost[3]) / 1000.0;
    const std::map<std::string, uint64_t> counts = contended(read_file(txt));
    for (size_t i = 0; i < kinds.size(); i++) {
      const std::string &kind = kinds[i].first;
      double bpftrace_us = theirs[i]->us_in_window(ours.err);
      const int waits = theirs[i]->waits();
      uint64_t ours_us = 0;
      for (const auto &l : lines)
        if (l.frames.size() >= 2 && kind_of(l) == kind)
          ours_us += l.value;
      const uint64_t ours_waits =
          counts.count(kind) ? counts.find(kind)->second : 0;
      const double expected = static_cast<double>(ours_us) + begin_us * waits;
      std::cerr << kind << " waits: offcpu " << ours_us << " us in "
                << ours_waits << " waits (+ " << begin_us << " us each of "
                << cost[1] << "), bpftrace " << bpftrace_us << " us in "
                << waits << " waits\n";
      EXPECT_GT(waits, min_waits) << kind << ": too few waits to judge";
      EXPECT_NEAR(static_cast<double>(ours_waits), waits, waits * 0.10 + 2)
          << kind;
      EXPECT_NEAR(expected, bpftrace_us,
                  bpftrace_us * 0.20 + slack_us_per_wait * waits)
          << kind << ": offcpu " << ours_us << " us (" << expected
          << " with its begins) vs bpftrace " << bpftrace_us << " us";
    }
    for (const auto &l : lines) {
      if (!function.empty()) {
        EXPECT_GE(test::frame_index(l, function), 0) << l.text;
      }
    }
    return lines;
  }

  // The text report's waits per kind (its rows' "contended" column).
  static std::map<std::string, uint64_t> contended(const std::string &text) {
    std::map<std::string, uint64_t> by_kind;
    const std::regex row("\n +(\\d+) +\\d+ us +\\d+ us +\\d+ us +(\\S+) ");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
         it != std::sregex_iterator(); ++it)
      by_kind[(*it)[2]] += std::stoull((*it)[1]);
    return by_kind;
  }
};

// Virtual consoles written by four threads: each write takes console_sem,
// a semaphore (flags 0), in down(); one lock for all.
TEST_F(LockKinds, SemaphoreWaitsAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_KINDS, "console", "4"});
  if (!w.missing().empty())
    GTEST_SKIP() << "console_sem, the semaphore user space reaches here, "
                    "needs virtual consoles: "
                 << w.missing();
  auto lines = agree(w, {{"semaphore", 0}}, "write_console");
  ASSERT_FALSE(lines.empty());
  std::set<std::string> locks;
  for (const auto &l : lines) {
    EXPECT_EQ(kind_of(l), "semaphore") << l.text;
    EXPECT_GE(test::frame_index(l, "down"), 0) << l.text;
    locks.insert(l.frames.back());
  }
  // console_sem by its symbol where kallsyms has data symbols, else by
  // address; one lock either way.
  EXPECT_EQ(locks.size(), 1u);
  EXPECT_TRUE(
      *locks.begin() == "console_sem" ||
      std::regex_match(*locks.begin(), std::regex("\\[lock 0x[0-9a-f]+\\]")))
      << *locks.begin();
}

// Registrars adding and removing uprobes take dup_mmap_sem, a percpu
// rw-semaphore, for writing (flags 0x14) and wait for each other; forks
// take it for reading (flags 0x12) and wait for them. Both sides in one
// run, each agreeing with bpftrace.
TEST_F(LockKinds, PercpuRwsemBothSidesAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_KINDS, "uprobe", "3", "2"});
  if (!w.missing().empty())
    GTEST_SKIP() << "registering uprobes needs uprobe_multi links (6.6+): "
                 << w.missing();
  auto lines =
      agree(w, {{"percpu-rwsem:write", 0x14}, {"percpu-rwsem:read", 0x12}}, "");
  ASSERT_FALSE(lines.empty());
  for (const auto &l : lines) {
    const std::string &kind = kind_of(l);
    if (kind == "percpu-rwsem:write") {
      EXPECT_GE(test::frame_index(l, "register_uprobe"), 0) << l.text;
      EXPECT_GE(test::frame_index(l, "percpu_down_write"), 0) << l.text;
    } else {
      EXPECT_EQ(kind, "percpu-rwsem:read") << l.text;
      EXPECT_GE(test::frame_index(l, "fork_child"), 0) << l.text;
    }
  }
}

// Listers reading a directory (getdents64: its i_rwsem for reading) while
// makers mkdir/rmdir in it: the read side's waits (flags 2).
TEST_F(LockKinds, RwsemReadWaitsAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_KINDS, "readdir", dir_, "2"});
  auto lines = agree(w, {{"rwsem:read", 2}}, "list_dir");
  ASSERT_FALSE(lines.empty());
  for (const auto &l : lines) {
    EXPECT_EQ(kind_of(l), "rwsem:read") << l.text;
    EXPECT_EQ(l.frames[0], "lister") << l.text;
  }
}

// Spinning kinds (on CPU, LCB_F_SPIN): contention only while two of the
// workload's threads run at once, which a loaded 2-CPU machine grants
// now and then; the tests need a few dozen waits, not thousands. Such a
// wait lasts a few us, as long as either tracer's programs. agree() adds
// offcpu's begin program to its side; what is left is mostly bpftrace's
// program at contention_end (its map lookups, sums and deletes), which
// runs inside offcpu's wait, plus what the kernel's run time of a program
// leaves out (the tracepoint's call into it) and a begin that costs
// offcpu more than its average one (the first of a wait, which walks its
// stacks, against a mutex waiter's phase change). Measured on the 2-vCPU
// VM: 0.1-0.5 us a wait, offcpu's side the longer.
constexpr double kSpinSlackUs = 1.0;

// Threads changing their signal masks: the process's sighand->siglock, a
// spinlock (flags 1), in set_blocked. Not a sleeping kind: absent unless
// asked for (-Y spinlock, or --spin).
TEST_F(LockKinds, SpinlockWaitsAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_KINDS, "siglock", "8"});
  auto lines = agree(w, {{"spinlock", 1}}, "", 5, kSpinSlackUs);
  ASSERT_FALSE(lines.empty());
  std::map<std::string, uint64_t> locks;
  uint64_t total = 0, in_function = 0;
  for (const auto &l : lines) {
    EXPECT_EQ(kind_of(l), "spinlock") << l.text;
    locks[l.frames.back()] += l.value;
    total += l.value;
    if (test::frame_index(l, "set_blocked") >= 0)
      in_function += l.value;
  }
  // An interrupt taken by a workload thread may spin on a lock of its own
  // (a wakeup's run-queue lock): charged to the thread too, rarely.
  EXPECT_GE(in_function, total * 9 / 10);
  // One siglock, in the process's sighand (a slab object:
  // [sighand_cache] where the kernel names caches, else its address),
  // holds the time (an interrupt's spinlock may add a little).
  uint64_t top = 0;
  for (const auto &[lock, us] : locks)
    top = std::max(top, us);
  EXPECT_GE(top, total * 9 / 10);
  auto sleeping = test::run(
      {OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-f", "1"}, 60);
  ASSERT_EQ(sleeping.exit_code, 0) << sleeping.err;
  for (const auto &l : test::parse_folded(sleeping.out))
    EXPECT_NE(kind_of(l), "spinlock") << "spinning by default: " << l.text;
}

// The kernel stack at a begin is reused while the words it was found in
// are unchanged (bpf/rwsem.bpf.c). Threads taking the siglock through two
// system calls in turns (rt_sigprocmask in set_blocked, rt_sigaction in
// set_action, eight of each): every wait's kernel stack is its own call's,
// the memo was used, and it was walked again when the call changed.
TEST_F(LockKinds, ReusedKernelStacksFollowTheirCall) {
  Workload w({WORKLOAD_LOCK_KINDS, "sigpaths", "8"});
  auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                         "-Y", "spinlock", "-v", "-f", "3"},
                        90);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      ours.err, m,
      std::regex("kernel stacks at waits' begins: (\\d+) walked, (\\d+) ")))
      << ours.err;
  EXPECT_GT(std::stoull(m[1]), 0u);
  EXPECT_GT(std::stoull(m[2]), 0u) << "no kernel stack was reused";
  uint64_t total = 0, action = 0, blocked = 0;
  for (const auto &l : test::parse_folded(ours.out)) {
    total += l.value;
    const bool by_action = test::frame_index(l, "set_action") >= 0;
    const bool by_mask = test::frame_index(l, "set_blocked") >= 0;
    const bool in_action = test::frame_index(l, "__x64_sys_rt_sigaction") >= 0;
    const bool in_mask = test::frame_index(l, "__x64_sys_rt_sigprocmask") >= 0;
    EXPECT_FALSE(by_action && in_mask) << l.text;
    EXPECT_FALSE(by_mask && in_action) << l.text;
    action += by_action && in_action ? l.value : 0;
    blocked += by_mask && in_mask ? l.value : 0;
  }
  std::cerr << "siglock waits: " << action << " us in rt_sigaction, " << blocked
            << " us in rt_sigprocmask of " << total << " us\n";
  EXPECT_GT(action, 0u);
  EXPECT_GT(blocked, 0u);
  // Interrupts spinning on locks of their own make the rest.
  EXPECT_GE(action + blocked, total * 9 / 10);
}

// One pipe's owner set (F_SETOWN: its f_owner lock, a rwlock, for
// writing, flags 5) and read (F_GETOWN: for reading, flags 3) by threads
// of their own: each side its own kind, each agreeing with bpftrace.
TEST_F(LockKinds, RwlockBothSidesAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_KINDS, "fowner", "3", "3"});
  auto lines =
      agree(w, {{"rwlock:write", 5}, {"rwlock:read", 3}}, "", 5, kSpinSlackUs);
  ASSERT_FALSE(lines.empty());
  uint64_t total = 0, in_function = 0;
  for (const auto &l : lines) {
    total += l.value;
    if (kind_of(l) == "rwlock:write") {
      in_function += test::frame_index(l, "set_owner") >= 0 ? l.value : 0;
    } else {
      EXPECT_EQ(kind_of(l), "rwlock:read") << l.text;
      in_function += test::frame_index(l, "get_owner") >= 0 ? l.value : 0;
    }
  }
  EXPECT_GE(in_function, total * 9 / 10);
}

// A mutex's waiters spin while its owner runs (mutex:spin, flags 33) and
// sleep when it does not (mutex, flags 32), in turns within one wait:
// with --spin each phase is charged to its own kind, and each kind's
// total agrees with bpftrace's phases; the sleeping total is the one
// offcpu lock reports without --spin. (One file's f_pos_lock, read
// through dup'ed descriptors by four threads.)
TEST_F(LockKinds, MutexSpinningAndSleepingEachAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_CONTEND, "fpos", "4"});
  auto lines = agree(w, {{"mutex", 32}, {"mutex:spin", 33}}, "read_shared_file",
                     5, kSpinSlackUs);
  std::set<std::string> kinds;
  for (const auto &l : lines)
    kinds.insert(kind_of(l));
  EXPECT_EQ(kinds, (std::set<std::string>{"mutex", "mutex:spin"}));
}

// -m and -M against each wait's length: a "holder" thread keeps a
// file's i_rwsem 20 ms at a time while two "waiter" threads write the
// file, so waits are ~20 ms (waiting for the holder) or short (for the
// other waiter). With -m 10000 offcpu's total is bpftrace's for the waits
// of 10 ms and more, none shorter shown; with -M 10000, the waits of at
// most 10 ms, none longer: a wait still open at the stop past -M is left
// out too. The text report's rows then show the quantiles and stacks
// (-v) of the file's lock.
TEST_F(LockKinds, MinAndMaxWaitAgreeWithBpftrace) {
  Workload w({WORKLOAD_LOCK_CONTEND, "hold", dir_, "2", "20"});
  constexpr uint64_t kLimitUs = 10000;
  for (const char *option : {"-m", "-M"}) {
    const bool min = std::string(option) == "-m";
    BpftraceWaits theirs(dir_, w.pid(), 4);
    ASSERT_TRUE(theirs.attached()) << "bpftrace did not start";
    const std::string folded = dir_ + "/w.folded", txt = dir_ + "/w.txt";
    auto ours = test::run(
        {OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y", "rwsem:write",
         option, std::to_string(kLimitUs), "-v", "-o", folded, "-o", txt, "3"},
        90);
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    ASSERT_TRUE(theirs.finish(ours.err)) << ours.err;
    const uint64_t limit_ns = kLimitUs * 1000;
    // Both sorts of wait happened: the option has something to leave out.
    EXPECT_GT(theirs.waits(0, limit_ns - 1), 0) << option;
    EXPECT_GT(theirs.waits(limit_ns + 1), 0) << option;
    const double want = min ? theirs.us(limit_ns) : theirs.us(0, limit_ns);
    uint64_t got = 0;
    for (const auto &l : test::parse_folded(read_file(folded)))
      got += l.value;
    std::cerr << option << " " << kLimitUs << ": offcpu " << got
              << " us, bpftrace " << want << " us of " << theirs.us()
              << " us\n";
    // Short waits are many and brief: a few us each of the tools' cost.
    EXPECT_NEAR(static_cast<double>(got), want, want * 0.20 + 2000.0) << option;
    // Every row's extremes and distribution within the limit.
    const std::string text = read_file(txt);
    const std::regex row(
        "\n +\\d+ +\\d+ us +(\\d+) us +\\d+ us  rwsem:write +\\S+ +\\S+\n"),
        bucket("\n +(\\d+) -> (\\d+) +: (\\d+) +\\|");
    int rows = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
         it != std::sregex_iterator(); ++it, ++rows) {
      const uint64_t max_us = std::stoull((*it)[1]);
      if (min) {
        EXPECT_GE(max_us, kLimitUs) << text;
      } else {
        EXPECT_LE(max_us, kLimitUs) << text;
      }
    }
    EXPECT_GT(rows, 0) << text;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), bucket);
         it != std::sregex_iterator(); ++it) {
      if (std::stoull((*it)[3]) == 0)
        continue;
      if (min) {
        EXPECT_GE(std::stoull((*it)[2]), kLimitUs) << (*it)[0] << text;
      } else {
        EXPECT_LE(std::stoull((*it)[1]), kLimitUs) << (*it)[0] << text;
      }
    }
    // -v: the row's quantiles, then its stacks: the waiter's function.
    EXPECT_TRUE(std::regex_search(
        text, std::regex("\n    p50 ~\\d+ us, p90 ~\\d+ us, p99 ~\\d+ us, "
                         "max \\d+ us\n(    .*\n)*? +(write_shared_file|"
                         "hold_file_lock)\n")))
        << text;
  }
}

// A PI futex contended by four threads. Where the kernel traces its
// rt_mutex waits (flags 8) offcpu's rtmutex total agrees with bpftrace's;
// where it does not (up to 6.18 at least: futex_lock_pi waits in
// rt_mutex_wait_proxy_lock, which has no contention tracepoint, and no
// other rt_mutex, i2c's or RCU boosting's, is reachable from user space)
// offcpu must report none either, and the test says so. The wait itself
// is offcpu lock --futex's futex:pi (futex_lock_test).
TEST_F(LockKinds, RtmutexWaitsAgreeWithBpftraceWhereTraced) {
  Workload w({WORKLOAD_LOCK_KINDS, "pi", "4"});
  BpftraceWaits theirs(dir_, w.pid(), 8);
  ASSERT_TRUE(theirs.attached()) << "bpftrace did not start";
  auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                         "-Y", "rtmutex", "-v", "-f", "3"},
                        90);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  double bpftrace_us = theirs.us_in_window(ours.err);
  auto lines = test::parse_folded(ours.out);
  uint64_t ours_us = 0;
  for (const auto &l : lines) {
    EXPECT_EQ(kind_of(l), "rtmutex") << l.text;
    EXPECT_GE(test::frame_index(l, "lock_pi_word"), 0) << l.text;
    ours_us += l.value;
  }
  if (theirs.waits() == 0) {
    EXPECT_EQ(ours_us, 0u) << ours.out;
    GTEST_SKIP() << "this kernel traces no rt_mutex contention of "
                    "FUTEX_LOCK_PI (rt_mutex_wait_proxy_lock has no "
                    "tracepoint), and no other rt_mutex is reachable from "
                    "user space: nothing to compare";
  }
  EXPECT_NEAR(static_cast<double>(ours_us), bpftrace_us, bpftrace_us * 0.20)
      << "offcpu " << ours_us << " us vs bpftrace " << bpftrace_us << " us";
}

// ---- What the outputs carry (no bpftrace needed) ----

class LockOutputs : public test::RootTest {};

// A sample of `go tool pprof -raw`: its delay, its locations' functions
// leaf first, its labels' text.
struct RawSample {
  uint64_t delay_ns = 0;
  std::vector<std::string> functions;
  std::string labels;
};

std::vector<RawSample> pprof_raw(const std::string &pb) {
  auto r = test::run({"/usr/bin/go", "tool", "pprof", "-raw", pb}, 120);
  std::map<int, std::string> names; // location id -> its function
  std::vector<std::pair<RawSample, std::vector<int>>> samples;
  std::istringstream in(r.out);
  std::string line;
  std::smatch m;
  const std::regex head("\\s+\\d+\\s+(\\d+): ([\\d ]+)"),
      location("\\s+(\\d+): 0x[0-9a-f]+ (?:M=\\d+ )?(.*) \\S*:\\d+ s=\\d+");
  bool in_locations = false;
  while (std::getline(in, line)) {
    if (line.rfind("Locations", 0) == 0) {
      in_locations = true;
    } else if (in_locations && std::regex_match(line, m, location)) {
      names[std::stoi(m[1])] = m[2];
    } else if (!in_locations && std::regex_match(line, m, head)) {
      RawSample s;
      s.delay_ns = std::stoull(m[1]);
      std::vector<int> ids;
      std::istringstream idl(m[2].str());
      for (int id; idl >> id;)
        ids.push_back(id);
      samples.emplace_back(s, ids);
    } else if (!in_locations && !samples.empty() &&
               line.find(":[") != std::string::npos) {
      samples.back().first.labels += line + " ";
    }
  }
  std::vector<RawSample> out;
  for (auto &[s, ids] : samples) {
    for (int id : ids)
      s.functions.push_back(names[id]);
    out.push_back(s);
  }
  return out;
}

// --holders: the owner the lock named at the wait's begin, where it is not
// the waker, is the folded stack's last frame "[owner COMM]"; pprof has
// the same frame as the sample's leaf and the owner as labels
// (owner_comm, owner_tid, beside waker_comm and waker_tid), on the same
// time as the folded output. The holder of lock_contend's "hold" mode
// keeps a file's i_rwsem 20 ms at a time; the two waiters take it from
// each other, so a waiter woken by the other often found the holder the
// owner when its wait began.
TEST_F(LockOutputs, OwnerAtBeginInPprof) {
  if (access("/usr/bin/go", X_OK) != 0)
    GTEST_SKIP() << "go (Debian golang-go) is absent: no pprof to decode with";
  Workload w({WORKLOAD_LOCK_CONTEND, "hold", dir_, "2", "20"});
  const std::string folded = dir_ + "/o.folded", pb = dir_ + "/o.pb.gz";
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "rwsem", "--holders", "-o", folded, "-o", pb, "3"},
                     90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, uint64_t> folded_us; // owner comm -> its waits' us
  for (const auto &l : test::parse_folded(read_file(folded))) {
    const std::string &last = l.frames.back();
    if (last.rfind("[owner ", 0) == 0)
      folded_us[last.substr(7, last.size() - 8)] += l.value;
  }
  ASSERT_FALSE(folded_us.empty()) << read_file(folded);
  std::map<std::string, uint64_t> pprof_ns;
  size_t owned = 0;
  for (const RawSample &s : pprof_raw(pb)) {
    ASSERT_FALSE(s.functions.empty());
    const std::string &leaf = s.functions.front();
    std::smatch m;
    bool label = std::regex_search(s.labels, m,
                                   std::regex("owner_comm:\\[([^\\]]*)\\]"));
    if (leaf.rfind("[owner ", 0) != 0) {
      EXPECT_FALSE(label) << s.labels;
      continue;
    }
    owned++;
    ASSERT_TRUE(label) << leaf << ": " << s.labels;
    EXPECT_EQ("[owner " + m[1].str() + "]", leaf);
    EXPECT_TRUE(std::regex_search(s.labels, std::regex("owner_tid:\\[\\d+\\]")))
        << s.labels;
    pprof_ns[m[1]] += s.delay_ns;
  }
  EXPECT_GT(owned, 0u);
  for (const auto &[comm, us] : folded_us) {
    // Each folded line rounds to a microsecond.
    EXPECT_NEAR(static_cast<double>(pprof_ns[comm]) / 1000.0,
                static_cast<double>(us), 1.0 + static_cast<double>(owned))
        << "owner " << comm;
  }
  EXPECT_EQ(pprof_ns.size(), folded_us.size());
}

// -i: a report per interval, cleared between; text and folded each
// interval, SVG and pprof for the whole run; the table's rows with their
// latency distribution; the kind and the lock as the stacks' last frames
// in every format.
TEST_F(LockOutputs, IntervalsAndEveryFormat) {
  Workload w({WORKLOAD_LOCK_CONTEND, "fpos", "4"});
  const std::string txt = dir_ + "/l.txt", folded = dir_ + "/l.folded",
                    svg = dir_ + "/l.svg", pb = dir_ + "/l.pb.gz";
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "mutex", "-i", "1", "--no-inline", "-o", txt, "-o",
                      folded, "-o", svg, "-o", pb, "3"},
                     90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  const std::string text = read_file(txt);
  std::regex header("\\[\\d\\d:\\d\\d:\\d\\d\\] lock waits over ([0-9.]+) s\n");
  std::vector<double> spans;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), header);
       it != std::sregex_iterator(); ++it)
    spans.push_back(std::stod((*it)[1]));
  ASSERT_EQ(spans.size(), 3u) << text;
  for (double s : spans)
    EXPECT_NEAR(s, 1.0, 0.3) << text;
  // Each interval's table: its header, a mutex row, its distribution.
  const std::regex row("\n +\\d+ +\\d+ us +\\d+ us +\\d+ us  mutex +\\S.*\n"
                       " +us : waits +\\|distribution +\\|\n");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), row),
                          std::sregex_iterator()),
            3)
      << text;
  // Folded: every interval's stacks, each ending in the kind and the lock.
  auto lines = test::parse_folded(read_file(folded));
  ASSERT_FALSE(lines.empty());
  for (const auto &l : lines)
    EXPECT_EQ(kind_of(l), "mutex") << l.text;
  const std::string lock = lines[0].frames.back();
  const std::string picture = read_file(svg);
  EXPECT_NE(picture.find("Lock Wait Flame Graph"), std::string::npos);
  EXPECT_NE(picture.find("read_shared_file"), std::string::npos);
  EXPECT_NE(picture.find(">mutex"), std::string::npos);
  if (access("/usr/bin/go", X_OK) == 0) {
    bool all = true;
    for (const RawSample &s : pprof_raw(pb))
      all = all && s.functions.size() > 2 && s.functions[0] == lock &&
            s.functions[1] == "mutex" &&
            std::find(s.functions.begin(), s.functions.end(),
                      "read_shared_file") != s.functions.end();
    EXPECT_TRUE(all) << "each pprof sample: the lock, mutex, the caller";
  }
}

// --by caller: a row per kernel function that waited (not the lock's own
// code), with -v its quantiles and stacks, user and kernel; --by thread: a
// row per waiting thread, each a workload thread.
TEST_F(LockOutputs, ByCallerAndByThread) {
  Workload w({WORKLOAD_LOCK_CONTEND, "fpos", "4"});
  const std::string pid = std::to_string(w.pid());
  auto by_caller = test::run({OFFCPU_BIN, "lock", "-p", pid, "-Y", "mutex",
                              "--by", "caller", "-v", "2"},
                             90);
  ASSERT_EQ(by_caller.exit_code, 0) << by_caller.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      by_caller.out, m,
      std::regex("contended +total wait +max wait +avg wait  kind +caller "
                 "+top caller\n +\\d+ +\\d+ us +\\d+ us +\\d+ us  mutex +"
                 "(\\S+) +(\\S+)\n")))
      << by_caller.out;
  // The caller of the f_pos lock: the file-position code, never the
  // mutex's own functions.
  EXPECT_EQ(m[1], m[2]);
  EXPECT_EQ(m[1].str().find("mutex"), std::string::npos) << m[1];
  EXPECT_NE(m[1].str().find("pos"), std::string::npos) << m[1];
  // -v: under the row, its quantiles, then its stacks leaf first: the
  // mutex's slow path, the caller, the workload's function, the thread.
  EXPECT_TRUE(std::regex_search(
      by_caller.out,
      std::regex("\n    p50 ~\\d+ us, p90 ~\\d+ us, p99 ~\\d+ us, max \\d+ "
                 "us\n(    .*\n)*? +__mutex_lock[^\n]*\n(    .*\n)*? +" +
                 m[1].str() +
                 "\n(    .*\n)*? +read_shared_file\n(    .*\n)*?"
                 " +- +lock_contend \\(\\d+\\) mutex wait on ")))
      << by_caller.out;
  auto by_thread = test::run(
      {OFFCPU_BIN, "lock", "-p", pid, "-Y", "mutex", "--by", "thread", "2"},
      90);
  ASSERT_EQ(by_thread.exit_code, 0) << by_thread.err;
  std::set<std::string> tids;
  const std::regex row("\n +\\d+ +\\d+ us +\\d+ us +\\d+ us  mutex +\\S+ +"
                       "lock_contend \\((\\d+)\\)\n");
  for (auto it = std::sregex_iterator(by_thread.out.begin(),
                                      by_thread.out.end(), row);
       it != std::sregex_iterator(); ++it)
    tids.insert((*it)[1]);
  EXPECT_GE(tids.size(), 2u) << by_thread.out;
  for (const std::string &tid : tids)
    EXPECT_EQ(access(("/proc/" + pid + "/task/" + tid).c_str(), F_OK), 0)
        << tid << " is no thread of the workload";
}

// The cascade for kernels without the contention tracepoints: asked for
// kprobes on a kernel without them (this one), offcpu lock fails with one
// line naming the way out, exit status 1, before tracing anything.
TEST_F(LockOutputs, KprobePlanFailsCleanlyWithoutKprobes) {
  auto r = test::run(
      {OFFCPU_BIN, "lock", "-p", "1", "--attach", "kprobe", "-f", "0.5"}, 60);
  if (r.exit_code == 0)
    GTEST_SKIP() << "this kernel has kprobes: the plan loads";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("try --attach tracepoint"), std::string::npos) << r.err;
}

} // namespace
} // namespace offcpu
