// The model every output format reads: symbolized samples, their frames and
// the modules the frames' code came from. symbolize/ builds it from what
// collect/ drained; output/ renders it. It knows nothing of either.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/boxed.h"
#include "model/frames.h"
#include "model/latency.h"

namespace offcpu {

enum class FrameKind {
  User,           // user-space code (a function, or [module] when unnamed)
  Kernel,         // kernel code
  Thread,         // the root of a laid-out stack: the thread's comm
  Marker,         // a stack that could not be taken: [Missed User Stack]...
  Delimiter,      // between the user and the kernel part (-d)
  Lock,           // what a lock wait waited for: its side, the lock
  Annotation,     // about the wait, not code: [D], [runqueue]
  WakerDelimiter, // "--": the waker's part begins (--wakers)
  Waker,          // a frame of the waker's part (its stacks, its comm)
  Group,          // the root above the thread: its cgroup (--per-cgroup)
  Python,         // a CPython frame: "function (file.py:line)" (issue #32)
};

// Where a frame's code lives: a file, [kernel.kallsyms], [perf-map]...
struct Module {
  std::string path;
  std::string build_id; // lowercase hex, may be empty
  // A separate debug file on this host holding the module's DWARF, for
  // readers that name code only from DWARF in the file a mapping names
  // (go tool pprof, with --no-symbolize). Empty if none was found.
  std::string debug_file;
};
constexpr uint32_t kNoModule = UINT32_MAX;

// A range of memory mapped from a module (pprof's Mapping): what turns a
// frame's address into an offset in its file. Processes that map a file
// at the same place (a server's workers, forked from one parent) share
// one, and so can share their stacks' frames.
struct MappedRange {
  uint64_t start = 0, limit = 0; // [start, limit)
  uint64_t file_offset = 0;      // of start
  uint32_t module = kNoModule;

  bool operator<(const MappedRange &o) const {
    return std::tie(start, limit, file_offset, module) <
           std::tie(o.start, o.limit, o.file_offset, o.module);
  }
};
constexpr uint32_t kNoMapping = UINT32_MAX;

// Where a user frame is in the source, from DWARF (issue #31).
struct FrameSource {
  std::string function;      // the name alone (Frame::name may add file:line)
  std::string file;          // of `line`, as DWARF names it; may be empty
  std::string function_file; // where the function is defined; may be empty
  uint32_t line = 0;         // 0: unknown
  uint32_t start_line = 0;   // the function's first line; 0: unknown
};

struct Frame {
  std::string name;
  FrameKind kind = FrameKind::User;
  uint32_t module = kNoModule;   // index into Profile::modules
  uint64_t address = 0;          // as the stack holds it
  uint32_t mapping = kNoMapping; // index into Profile::mappings (user code)
  // The address is where a call returns to (every frame but a stack's
  // first): the call itself is the byte before.
  bool return_address = false;
  // A function inlined into the frame before it (root first): the same
  // address, a call that is not on the stack.
  bool inlined = false;
  std::shared_ptr<const FrameSource> source{}; // null: no DWARF for it
};

using Frames = SharedFrames<Frame>;

// What a lock-wait sample adds (offcpu lock, offcpu rwsem).
struct LockWait {
  uint64_t max_ns = 0;
  bool write = true; // else a read-side wait
  std::string lock;  // "mmap_lock", a kernel symbol, or an address
  // offcpu lock: the kind ("mutex", "rwsem:write"), its frame in place of
  // rwsem's "write" or "read". Empty for offcpu rwsem.
  std::string kind{};
  // --holders: the task the lock's owner word named when the wait began
  // (mutex, rwsem writer); tid 0: none recorded.
  uint32_t owner_tid = 0;
  std::string owner_comm{};
  // A futex wait's holder without --wakers: "comm (tid)" of the thread
  // whose wakeup ended it; empty if none was seen.
  std::string holder{};

  std::string kind_frame() const {
    return !kind.empty() ? kind : write ? "write" : "read";
  }
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
  Frames user;   // root first
  Frames kernel; // root first
};

// One (thread, user stack, kernel stack[, waker]) with its total time.
struct Sample {
  uint32_t tgid = 0;
  uint32_t tid = 0;
  std::string comm;
  Frames user;              // root first
  Frames kernel;            // root first
  bool user_missed = false; // a user stack was wanted but not taken
  bool kernel_missed = false;
  bool kernel_nosched = false; // kernel stack lacks the __sched frames
  uint64_t total_ns = 0;
  uint64_t count = 0;
  uint64_t runq_ns = 0; // --runqueue: the part spent runnable, in total_ns
  // How long its waits lasted; empty where not measured (folded input,
  // waits that found the aggregation map full).
  Latency latency;
  char state = 0;     // --show-state: R, S, D, I or T
  std::string cgroup; // --per-cgroup: its systemd unit or cgroup path
  Boxed<Waker> waker;
  Boxed<LockWait> lock;
};

struct Timeline; // model/timeline.h

enum class ProfileKind {
  OffCpu,    // time off CPU, per wait
  LockWaits, // time waiting for locks, per contention
  // Stacks read back from folded text (offcpu flamegraph): no thread ids,
  // one count per line, values in `folded_unit` (total_ns holds a
  // thousandth of one: nanoseconds when the unit is us).
  Folded,
};

struct Profile {
  ProfileKind kind = ProfileKind::OffCpu;
  std::vector<Sample> samples;
  std::vector<Module> modules;
  std::vector<MappedRange> mappings;
  // False with --no-symbolize: user frames in files carry their address
  // only, to be named by whoever reads the profile (pprof servers).
  bool user_symbolized = true;
  int64_t time_nanos = 0; // wall clock when tracing started
  int64_t duration_nanos = 0;
  std::string comment; // what was traced, for pprof
  // The timeline of long waits, when asked for (.json, .perfetto-trace).
  std::shared_ptr<const Timeline> timeline;
  std::string folded_unit = "us"; // ProfileKind::Folded only
  bool runqueue = false;          // samples carry runq_ns (--runqueue)
  // Off-CPU time by the state waits began in (R, S, D, I, T); empty where
  // not measured.
  std::vector<uint64_t> state_ns;

  // The index of the module with this path and build id (added on first
  // use): two files at one path (two containers, a binary replaced during
  // the run) are two modules, each keeping its own build id. A debug file
  // given later fills one still without.
  uint32_t module(const std::string &path, const std::string &build_id,
                  const std::string &debug_file = "");
  // The index of this mapped range (added on first use).
  uint32_t mapping(const MappedRange &range);
  // Adds another profile's samples (one interval of a longer run), their
  // frames' modules and mappings renumbered into this one's.
  void append(const Profile &other);

private:
  std::map<std::pair<std::string, std::string>, uint32_t> module_index_;
  std::map<MappedRange, uint32_t> mapping_index_;
};

} // namespace offcpu
