// The model every output format reads: symbolized samples, their frames and
// the modules the frames' code came from. symbolize/ builds it from what
// collect/ drained; output/ renders it. It knows nothing of either.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace offcpu {

enum class FrameKind {
  User,           // user-space code (a function, or [module] when unnamed)
  Kernel,         // kernel code
  Thread,         // the root of a laid-out stack: the thread's comm
  Marker,         // a stack that could not be taken: [Missed User Stack]...
  Delimiter,      // between the user and the kernel part (-d)
  Annotation,     // about the wait, not code: [D], [runqueue]
  WakerDelimiter, // "--": the waker's part begins (--wakers)
  Waker,          // a frame of the waker's part (its stacks, its comm)
  Group,          // the root above the thread: its cgroup (--per-cgroup)
};

// Where a frame's code lives: a file, [kernel.kallsyms], [perf-map]...
struct Module {
  std::string path;
  std::string build_id; // lowercase hex, may be empty
};
constexpr uint32_t kNoModule = UINT32_MAX;

struct Frame {
  std::string name;
  FrameKind kind = FrameKind::User;
  uint32_t module = kNoModule; // index into Profile::modules
  uint64_t address = 0;        // as the stack holds it
};

// What a lock-wait sample adds (offcpu rwsem).
struct LockWait {
  uint64_t max_ns = 0;
  bool write = true; // else a read-side wait
  std::string lock;  // "mmap_lock", a kernel symbol, or an address
};

// Who woke a wait (--wakers).
struct Waker {
  enum class Kind {
    Task,      // a task: its stacks and comm
    Timer,     // a timer expired (a timeout, a sleep)
    Interrupt, // another interrupt: its kernel frames
    Unseen,    // no wakeup was seen (it began before tracing, or was lost)
    Preempted, // runnable all along: nobody had to wake it
    TooShort,  // shorter than -m when woken: not recorded
    Lost,      // the wakers map was full
    Waiting,   // still waiting when tracing ended
  };
  Kind kind = Kind::Unseen;
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  std::vector<Frame> user;   // root first
  std::vector<Frame> kernel; // root first
};

// One (thread, user stack, kernel stack[, waker]) with its total time.
struct Sample {
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  std::vector<Frame> user;   // root first
  std::vector<Frame> kernel; // root first
  bool user_missed = false;  // a user stack was wanted but not taken
  bool kernel_missed = false;
  bool kernel_nosched = false; // kernel stack lacks the __sched frames
  uint64_t total_ns = 0;
  uint64_t count = 0;
  uint64_t runq_ns = 0; // --runqueue: the part spent runnable, in total_ns
  char state = 0;       // --show-state: R, S, D, I or T
  std::string cgroup;   // --per-cgroup: its systemd unit or cgroup path
  std::optional<Waker> waker;
  std::optional<LockWait> lock;
};

enum class ProfileKind {
  OffCpu,    // time off CPU, per wait
  LockWaits, // time waiting for locks, per contention
};

struct Profile {
  ProfileKind kind = ProfileKind::OffCpu;
  std::vector<Sample> samples;
  std::vector<Module> modules;
  int64_t time_nanos = 0; // wall clock when tracing started
  int64_t duration_nanos = 0;
  std::string comment;   // what was traced, for pprof
  bool runqueue = false; // samples carry runq_ns (--runqueue)
  // Off-CPU time by the state waits began in (R, S, D, I, T); empty where
  // not measured.
  std::vector<uint64_t> state_ns;

  // The index of the module with this path (added on first use; the first
  // build id given for a path stays).
  uint32_t module(const std::string &path, const std::string &build_id);

private:
  std::map<std::string, uint32_t> module_index_;
};

} // namespace offcpu
