// `offcpu lock` end to end, as root, against workloads that contend kernel
// locks in known ways (tests/workloads/lock_contend.c, mmap_churn.c): the
// kind and the lock named as the stack's last two frames, the workload's
// own function in the stack, and per kind the total compared with a
// bpftrace script of our own on the same tracepoints over the same window.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "support/bpftrace_total.h"
#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class Contender {
public:
  explicit Contender(std::vector<std::string> args) {
    proc_ = std::make_unique<test::Subprocess>(args);
    auto line = proc_->read_line(10);
    if (!line || line->rfind("ready ", 0) != 0)
      throw std::runtime_error("workload did not start: " + args[0]);
    pid_ = std::stoi(line->substr(6));
  }
  int pid() const { return pid_; }

private:
  std::unique_ptr<test::Subprocess> proc_;
  int pid_ = 0;
};

class Lock : public test::RootTest {};

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

bool has_frame(const test::FoldedLine &l, const std::string &f) {
  return test::frame_index(l, f) >= 0;
}

const std::string &kind_of(const test::FoldedLine &l) {
  return l.frames[l.frames.size() - 2];
}

// bpftrace's waits of `pid` whose contention_begin flags equal `flags`. A
// wait ends at contention_end of its lock, or where the same lock begins
// again with other flags (a mutex waiter spinning between sleeps): what
// offcpu lock charges as a kind.
std::string lock_waits_script(int pid, unsigned flags) {
  std::string who = "pid == " + std::to_string(pid);
  std::string other = std::to_string(flags);
  return "tracepoint:lock:contention_begin /" + who +
         " && @start[tid] && @lk[tid] == (uint64)args->lock_addr && "
         "args->flags != " +
         other +
         "/ { @t = @t + (nsecs - @start[tid]); delete(@start[tid]); }\n"
         "tracepoint:lock:contention_begin /" +
         who + " && args->flags == " + other +
         " && !@start[tid]/ { @start[tid] = nsecs; @lk[tid] = "
         "(uint64)args->lock_addr; }\n"
         "tracepoint:lock:contention_end /@start[tid] && @lk[tid] == "
         "(uint64)args->lock_addr/ { @t = @t + (nsecs - @start[tid]); "
         "delete(@start[tid]); }\n";
}

uint64_t total_of_kind(const std::vector<test::FoldedLine> &lines,
                       const std::string &kind) {
  uint64_t t = 0;
  for (const auto &l : lines)
    if (l.frames.size() >= 2 && kind_of(l) == kind)
      t += l.value;
  return t;
}

// The workload under another name (its comm): a run of the same test
// elsewhere on the machine does not share it.
std::string renamed(const std::string &dir, const std::string &name) {
  const std::string path = dir + "/" + name;
  if (symlink(WORKLOAD_LOCK_CONTEND, path.c_str()) != 0 && errno != EEXIST)
    throw std::runtime_error("symlink " + path + " failed");
  return path;
}

// The BPF links `pid` holds; offcpu lock attaches its waits' begins last.
int bpf_links(int pid) {
  return test::fds_linking_to(pid, "anon_inode:bpf_link");
}

// Until offcpu (`pid`) holds `links` BPF links: tracing from then on.
bool wait_attached(int pid, int links) {
  for (double t0 = test::now_seconds(); test::now_seconds() - t0 < 90;
       test::sleep_seconds(0.05))
    if (bpf_links(pid) >= links)
      return true;
  return false;
}

// The text report's rows with --by thread: thread id -> total us.
std::map<int, uint64_t> rows_by_thread(const std::string &text) {
  std::map<int, uint64_t> rows;
  const std::regex row("\n +\\d+ +(\\d+) us +\\d+ us +\\d+ us  [^\n]* "
                       "\\((\\d+)\\)(?=\n)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
       it != std::sregex_iterator(); ++it)
    rows[std::stoi((*it)[2])] += std::stoull((*it)[1]);
  return rows;
}

// True for a kernel thread (PF_KTHREAD in /proc/TID/stat); nullopt once
// the thread is gone.
std::optional<bool> kernel_thread(int tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos)
    return std::nullopt;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 9 && rest >> field; i++) {
  }
  return (std::stoul(field) & 0x00200000) != 0;
}

// The threads of process `pid`.
std::set<int> threads_of(int pid) {
  std::set<int> tids;
  if (DIR *d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.')
        tids.insert(std::stoi(e->d_name));
    closedir(d);
  }
  return tids;
}

// A cgroup v2 of the test's own, removed at the end (after the processes
// in it, declared later, are gone). Empty path without cgroup v2.
struct TestCgroup {
  std::string path;
  explicit TestCgroup(const std::string &name) {
    for (const char *p : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      struct statfs fs {};
      if (path.empty() && statfs(p, &fs) == 0 &&
          static_cast<unsigned long>(fs.f_type) == 0x63677270)
        path = std::string(p) + "/" + name + "-" + std::to_string(getpid());
    }
    if (!path.empty() && mkdir(path.c_str(), 0755) != 0)
      path.clear();
  }
  ~TestCgroup() {
    if (path.empty())
      return;
    test::sleep_seconds(0.2);
    rmdir(path.c_str());
  }
  void add(int pid) const {
    std::ofstream(path + "/cgroup.procs") << pid << "\n";
  }
};

// One file description read through dup'ed fds by four threads: its
// f_pos_lock, a mutex, is contended. Sleeping waits only by default, in
// read_shared_file; the total agrees with bpftrace's for flags 32 (MUTEX).
TEST_F(Lock, MutexWaitsAgreeWithBpftrace) {
  if (auto why = test::bpftrace_unavailable("lock"); !why.empty())
    GTEST_SKIP() << why;
  Contender w({WORKLOAD_LOCK_CONTEND, "fpos", "4"});
  test::BpftraceTotal bpftrace(lock_waits_script(w.pid(), 32));
  ASSERT_TRUE(bpftrace.attached()) << "bpftrace did not start";
  auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                         "-Y", "mutex", "-v", "-f", "3"},
                        60);
  double bpftrace_us = bpftrace.us_between(ours.err);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  auto lines = test::parse_folded(ours.out);
  ASSERT_FALSE(lines.empty()) << ours.err;
  for (const auto &l : lines) {
    EXPECT_EQ(kind_of(l), "mutex") << l.text;
    EXPECT_TRUE(has_frame(l, "read_shared_file")) << l.text;
    // The mutex's slow path (__mutex_lock, __mutex_lock.constprop.0...).
    EXPECT_TRUE(std::any_of(
        l.frames.begin(), l.frames.end(),
        [](const std::string &f) { return f.rfind("__mutex_lock", 0) == 0; }))
        << l.text;
  }
  double ours_us = static_cast<double>(total_of_kind(lines, "mutex"));
  EXPECT_GT(bpftrace_us, 0);
  EXPECT_NEAR(ours_us, bpftrace_us, bpftrace_us * 0.20)
      << "offcpu " << ours_us << " us vs bpftrace " << bpftrace_us << " us";
  std::cerr << "mutex waits: offcpu " << ours_us << " us, bpftrace "
            << bpftrace_us << " us\n";
}

// --spin adds the spinning phase as its own kind, never mixed into the
// sleeping one.
TEST_F(Lock, SpinningIsItsOwnKind) {
  Contender w({WORKLOAD_LOCK_CONTEND, "fpos", "4"});
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "mutex", "--spin", "-f", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  std::set<std::string> kinds;
  for (const auto &l : lines)
    kinds.insert(kind_of(l));
  EXPECT_TRUE(kinds.count("mutex")) << r.out;
  EXPECT_TRUE(kinds.count("mutex:spin")) << r.out;
  EXPECT_EQ(kinds.size(), 2u) << r.out;
}

// The directory's i_rwsem: write waits (flags 4, LCB_F_WRITE) add up to
// what bpftrace measures on the same tracepoints over the same window.
TEST_F(Lock, RwsemWriteWaitsAgreeWithBpftrace) {
  if (auto why = test::bpftrace_unavailable("lock"); !why.empty())
    GTEST_SKIP() << why;
  Contender w({WORKLOAD_LOCK_CONTEND, "dir", dir_, "4"});
  test::BpftraceTotal bpftrace(lock_waits_script(w.pid(), 4));
  ASSERT_TRUE(bpftrace.attached()) << "bpftrace did not start";
  auto ours = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()),
                         "-Y", "rwsem:write", "-v", "-f", "3"},
                        60);
  double bpftrace_us = bpftrace.us_between(ours.err);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  auto lines = test::parse_folded(ours.out);
  ASSERT_FALSE(lines.empty()) << ours.err;
  double ours_us = static_cast<double>(total_of_kind(lines, "rwsem:write"));
  EXPECT_GT(bpftrace_us, 0);
  EXPECT_NEAR(ours_us, bpftrace_us, bpftrace_us * 0.20)
      << "offcpu " << ours_us << " us vs bpftrace " << bpftrace_us << " us";
  std::cerr << "rwsem:write waits: offcpu " << ours_us << " us, bpftrace "
            << bpftrace_us << " us\n";
}

// mkdir/rmdir in one directory: its i_rwsem, for writing, by the workload's
// own function; -Y rwsem leaves the mutexes out.
TEST_F(Lock, DirectoryRwsemByKind) {
  Contender w({WORKLOAD_LOCK_CONTEND, "dir", dir_, "4"});
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "rwsem", "-o", dir_ + "/out.folded", "-o",
                      dir_ + "/out.txt", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(read_file(dir_ + "/out.folded"));
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t in_function = 0, total = 0;
  for (const auto &l : lines) {
    EXPECT_TRUE(kind_of(l) == "rwsem:write" || kind_of(l) == "rwsem:read")
        << l.text;
    total += l.value;
    if (has_frame(l, "make_and_remove") && kind_of(l) == "rwsem:write")
      in_function += l.value;
  }
  EXPECT_GT(in_function, total * 9 / 10);
  // The table: the directory's lock first, named by the slab cache of the
  // inode it lies in (6.12+; by address before).
  std::string text = read_file(dir_ + "/out.txt");
  EXPECT_TRUE(std::regex_search(
      text, std::regex("\n +\\d+ +\\d+ us +\\d+ us +\\d+ us  rwsem:write +"
                       "\\[(\\w*inode_cache|lock 0x[0-9a-f]+)\\] +\\w+")))
      << text;
  EXPECT_EQ(text.find("mmap_lock"), std::string::npos) << text;
}

// --holders: a thread named "holder" keeps a file's i_rwsem for 20 ms at a
// time in hold_file_lock (its write faults in a userfaultfd page under the
// lock); the "waiter" threads' waits end with the holder's release path,
// its function and its comm last, or, where the other waiter took the lock
// first, with the owner at their begin, the holder; the lock is named by
// its slab cache (the file system's inode cache: ext4_inode_cache,
// shmem_inode_cache...).
TEST_F(Lock, HoldersAndSlabCacheName) {
  Contender w({WORKLOAD_LOCK_CONTEND, "hold", dir_, "2", "20"});
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "rwsem", "--holders", "-o", dir_ + "/out.folded", "-o",
                      dir_ + "/out.txt", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(read_file(dir_ + "/out.folded"));
  ASSERT_FALSE(lines.empty()) << r.err;
  const std::regex inode_cache("\\[\\w*inode_cache\\]");
  uint64_t waited = 0, held_by_holder = 0;
  for (const auto &l : lines) {
    int dash = test::frame_index(l, "--");
    ASSERT_GE(dash, 2) << l.text;
    if (l.frames[0] != "waiter" || !has_frame(l, "write_shared_file"))
      continue;
    EXPECT_EQ(l.frames[dash - 2], "rwsem:write") << l.text;
    EXPECT_TRUE(std::regex_match(l.frames[dash - 1], inode_cache)) << l.text;
    waited += l.value;
    const std::string &last = l.frames.back();
    bool owner = last.rfind("[owner ", 0) == 0;
    if (owner) {
      EXPECT_TRUE(last == "[owner holder]" || last == "[owner waiter]")
          << l.text;
    }
    const std::string &comm = l.frames[l.frames.size() - (owner ? 2 : 1)];
    bool by_holder =
        comm == "holder" && std::find(l.frames.begin() + dash, l.frames.end(),
                                      "hold_file_lock") != l.frames.end();
    // A wake by the holder is one from its release path.
    if (comm == "holder") {
      EXPECT_TRUE(by_holder) << l.text;
    }
    // Woken by the other waiter, which had the lock first after the
    // holder: the owner when the wait began was the holder.
    if (by_holder || last == "[owner holder]")
      held_by_holder += l.value;
  }
  // The holder keeps the lock ~20 ms of every ~20 ms: two waiters wait
  // most of 2 s each; the holder releases it to one of them each time,
  // that one to the other.
  EXPECT_GT(waited, 1000000u) << r.err;
  // How often the holder wakes a waiter directly rather than through the
  // other waiter is the scheduler's choice: 22-26% of the waited time on a
  // quiet 2-CPU VM, 7.5% once in CI; on a VM up for two hours, under 2.5%
  // in 13 runs of 14 and none in 3 of them (the session's first build as
  // often as its last).
  // The holder is seen either way: as the waker or as the owner at begin.
  EXPECT_GT(held_by_holder, waited * 7 / 10) << read_file(dir_ + "/out.folded");
  // The table names the cache and draws the row's distribution.
  std::string text = read_file(dir_ + "/out.txt");
  EXPECT_TRUE(std::regex_search(
      text, std::regex("rwsem:write +\\[\\w*inode_cache\\] +\\w+\n"
                       "( +us : waits +\\|distribution +\\|\n)")))
      << text;
}

// -- COMMAND: the command and what it forks are traced from their start,
// nothing else; offcpu ends when the command does, with its status.
TEST_F(Lock, CommandAndItsChildren) {
  const std::string script = std::string(WORKLOAD_LOCK_CONTEND) + " dir " +
                             dir_ + " 4 >/dev/null & sleep 2; kill $!";
  auto r = test::run({OFFCPU_BIN, "lock", "-Y", "rwsem", "-o",
                      dir_ + "/out.folded", "--", "/bin/sh", "-c", script},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(read_file(dir_ + "/out.folded"));
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t child = 0;
  for (const auto &l : lines) {
    EXPECT_TRUE(l.frames[0] == "lock_contend" || l.frames[0] == "sh" ||
                l.frames[0] == "sleep")
        << "only the command and its children: " << l.text;
    if (l.frames[0] == "lock_contend" && has_frame(l, "make_and_remove"))
      child += l.value;
  }
  // Four threads contending one directory for ~2 s: most of it waiting.
  EXPECT_GT(child, 500000u) << r.err;
}

// --by cgroup: one row per cgroup of the waiters, named by its path (or
// systemd unit); the workload's own cgroup made for the test.
TEST_F(Lock, ByCgroup) {
  TestCgroup cg("offcpu-lock-test");
  if (cg.path.empty())
    GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string name = cg.path.substr(cg.path.rfind('/') + 1);
  Contender w({WORKLOAD_LOCK_CONTEND, "dir", dir_, "4"});
  cg.add(w.pid());
  auto r = test::run({OFFCPU_BIN, "lock", "-p", std::to_string(w.pid()), "-Y",
                      "rwsem", "--by", "cgroup", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\n +\\d+ +\\d+ us +\\d+ us +\\d+ us  "
                        "rwsem:write +/" +
                        name + " +\\w+\n")))
      << r.out;
}

// --cgroup: the tasks in that cgroup only, whatever their process: the
// workload moved into the test's cgroup is traced, its twin outside is
// not (no -p: the whole machine, filtered in BPF).
TEST_F(Lock, CgroupFilter) {
  TestCgroup cg("offcpu-lock-cg");
  if (cg.path.empty())
    GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string in = "lkin" + std::to_string(getpid() % 100000),
                    out = "lkout" + std::to_string(getpid() % 100000);
  ASSERT_EQ(mkdir((dir_ + "/in").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/out").c_str(), 0755), 0);
  Contender inside({renamed(dir_, in), "dir", dir_ + "/in", "2"});
  cg.add(inside.pid());
  Contender outside({renamed(dir_, out), "dir", dir_ + "/out", "2"});
  auto r = test::run(
      {OFFCPU_BIN, "lock", "--cgroup", cg.path, "-Y", "rwsem", "-f", "2"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto totals = test::totals_by_comm(test::parse_folded(r.out));
  EXPECT_GT(totals[in], 100000u) << r.out;
  EXPECT_EQ(totals.count(out), 0u) << r.out;
  EXPECT_EQ(totals.size(), 1u) << r.out;
}

// -t: that thread's waits only, one row with --by thread.
TEST_F(Lock, OneThread) {
  Contender w({WORKLOAD_LOCK_CONTEND, "dir", dir_, "4"});
  std::set<int> tids = threads_of(w.pid());
  tids.erase(w.pid()); // the main thread only waits in pause()
  ASSERT_EQ(tids.size(), 4u);
  const int tid = *tids.rbegin();
  auto r = test::run({OFFCPU_BIN, "lock", "-t", std::to_string(tid), "-Y",
                      "rwsem", "--by", "thread", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = rows_by_thread(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows.begin()->first, tid) << r.out;
  EXPECT_GT(rows.begin()->second, 100000u) << r.out;
}

// -n NAME for a process that starts after tracing did: traced from its
// start, and only it.
TEST_F(Lock, NamedProcessStartedLater) {
  const std::string name = "lklate" + std::to_string(getpid() % 100000);
  const std::string path = renamed(dir_, name);
  test::Subprocess tracer(
      {OFFCPU_BIN, "lock", "-n", name, "-Y", "rwsem", "-f", "4"});
  ASSERT_TRUE(wait_attached(tracer.pid(), 2)) << "offcpu did not attach";
  Contender late({path, "dir", dir_, "4"});
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no process named '" + name + "' yet"),
            std::string::npos)
      << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t in_function = 0;
  for (const auto &l : lines) {
    EXPECT_EQ(l.frames[0], name) << l.text;
    if (has_frame(l, "make_and_remove"))
      in_function += l.value;
  }
  EXPECT_GT(in_function, 500000u) << r.out;
}

// --children with -p: the processes the traced one forks from then on are
// traced (a shell's child started once tracing runs), a process outside
// that family is not.
TEST_F(Lock, ChildrenOfATracedProcess) {
  const std::string other = "lkother" + std::to_string(getpid() % 100000);
  ASSERT_EQ(mkdir((dir_ + "/other").c_str(), 0755), 0);
  Contender unrelated({renamed(dir_, other), "dir", dir_ + "/other", "2"});
  const std::string go = dir_ + "/go";
  test::Subprocess parent(
      {"/bin/sh", "-c",
       "echo ready $$; while [ ! -e " + go + " ]; do sleep 0.05; done; " +
           WORKLOAD_LOCK_CONTEND + " dir " + dir_ + " 4 >/dev/null & wait"});
  auto ready = parent.read_line(10);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  test::Subprocess tracer({OFFCPU_BIN, "lock", "-p",
                           std::to_string(parent.pid()), "--children", "-Y",
                           "rwsem", "-f", "4"});
  // contention_end, fork, exit, then contention_begin.
  ASSERT_TRUE(wait_attached(tracer.pid(), 4)) << "offcpu did not attach";
  std::ofstream(go) << "\n";
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto totals = test::totals_by_comm(test::parse_folded(r.out));
  EXPECT_GT(totals["lock_contend"], 500000u) << r.out;
  EXPECT_EQ(totals.count(other), 0u) << r.out;
}

// -u: user threads only (the workload's among them, no kernel thread);
// -k: kernel threads only (none of the workload's). The whole machine,
// each thread checked in /proc while it lives.
TEST_F(Lock, UserOrKernelThreadsOnly) {
  Contender w({WORKLOAD_LOCK_CONTEND, "dir", dir_, "4"});
  const std::set<int> workload = threads_of(w.pid());
  for (const char *only : {"-u", "-k"}) {
    const bool user = std::string(only) == "-u";
    auto r = test::run({OFFCPU_BIN, "lock", only, "--by", "thread", "2"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rows = rows_by_thread(r.out);
    uint64_t ours = 0;
    for (const auto &[tid, us] : rows) {
      if (workload.count(tid))
        ours += us;
      if (auto k = kernel_thread(tid)) {
        EXPECT_EQ(*k, !user) << only << ": thread " << tid << "\n" << r.out;
      }
    }
    if (user) {
      EXPECT_GT(ours, 500000u) << r.out;
    } else {
      EXPECT_EQ(ours, 0u) << r.out;
    }
  }
}

// Threads mapping and unmapping: their mm's mmap_lock, by name, found by
// process name (-n).
TEST_F(Lock, MmapLockNamed) {
  Contender w({WORKLOAD_MMAP_CHURN, "4"});
  auto r = test::run({OFFCPU_BIN, "lock", "-n", "mmap_churn", "-f", "2"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  uint64_t named = 0;
  for (const auto &l : lines) {
    EXPECT_EQ(l.frames[0], "mmap_churn") << l.text;
    if (l.frames.back() == "mmap_lock" && kind_of(l) == "rwsem:write" &&
        has_frame(l, "churn_mappings"))
      named++;
  }
  EXPECT_GT(named, 0u) << r.out;
}

// This kernel refuses fentry (EPERM) and has no kprobes: offcpu lock takes
// the tracepoints first (-v says so); asked for fentry alone, it fails with
// one line naming the probes refused and the way out.
TEST_F(Lock, AttachPlanFallsBackAndSaysWhy) {
  auto r = test::run({OFFCPU_BIN, "lock", "-p", "1", "-v", "-f", "0.5"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("lock waits traced with tp_btf lock:contention_begin"),
            std::string::npos)
      << r.err;
  auto f = test::run(
      {OFFCPU_BIN, "lock", "-p", "1", "--attach", "fentry", "-f", "0.5"}, 60);
  if (f.exit_code == 0)
    GTEST_SKIP() << "this kernel allows fentry: nothing to fall back from";
  EXPECT_NE(f.err.find("__mutex_lock_slowpath"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("try --attach tracepoint"), std::string::npos) << f.err;
}

} // namespace
} // namespace offcpu
