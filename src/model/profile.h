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
  User,      // user-space code (a function, or [module] when unnamed)
  Kernel,    // kernel code
  Thread,    // the root of a laid-out stack: the thread's comm
  Marker,    // a stack that could not be taken: [Missed User Stack]...
  Delimiter, // between the user and the kernel part (-d)
  Lock,      // what a lock wait waited for: its side, the lock
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

// One (thread, user stack, kernel stack) with its total time.
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
  std::string comment; // what was traced, for pprof

  // The index of the module with this path (added on first use; the first
  // build id given for a path stays).
  uint32_t module(const std::string &path, const std::string &build_id);

private:
  std::map<std::string, uint32_t> module_index_;
};

} // namespace offcpu
