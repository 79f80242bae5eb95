// Command-line options: one struct per command, parsed by CLI11. Parsing is
// pure (no kernel, no /proc beyond validating PIDs through a callback) so it
// is unit-tested directly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace offcpu {

// Which sched_switch hook to use; "auto" probes the kernel. The others exist
// to exercise fallbacks on kernels that have the preferred one.
enum class AttachChoice { Auto, TpBtf, RawTp };

// Where kernel stacks are taken: Auto walks them with the ORC walker when
// the task runs again where the kernel allows it, else at switch-out.
enum class KernelUnwind { Auto, Orc, SwitchOut };

// Who loads the BPF programs: the kernel (light skeleton, nothing parsed
// here) where it can, else libbpf. The choice is for tests and checks.
enum class Loader { Auto, Light, Libbpf };

enum class OutputFormat { Text, Folded, Svg, Pprof };

// Where and how results are written; shared by the commands.
struct OutputTarget {
  std::string path;
  OutputFormat format;
};

struct OutputOptions {
  OutputFormat format = OutputFormat::Text;
  std::optional<std::string> path; // the first -o; none: stdout
  // Every -o (the profile command takes several, e.g. out.svg and
  // out.pb.gz from one run); a known extension picks the file's format.
  std::vector<OutputTarget> targets;
  bool delimited = false;
  std::string title;      // SVG title; empty: the command's default
  int width = 1200;       // SVG width in pixels
  double min_width = 0.1; // SVG: narrower frames are left out
  bool quiet = false;     // no progress line
  // Extra roots for separate debug files, searched before /usr/lib/debug.
  std::vector<std::string> debug_dirs;
};

struct ProfileOptions {
  std::vector<uint32_t> pids; // processes: all their threads
  std::vector<uint32_t> tids; // individual threads
  bool user_threads_only = false;
  bool kernel_threads_only = false;
  bool user_stacks_only = false;
  bool kernel_stacks_only = false;
  OutputOptions output;
  uint64_t min_block_us = 1;
  uint64_t max_block_us = UINT64_MAX;
  std::optional<int64_t> state; // BCC --state
  uint32_t stack_storage_size = 16384;
  uint32_t max_stack_depth = 127;
  uint32_t max_entries = 65536;     // distinct (thread, stack) keys
  std::optional<double> duration_s; // none: until Ctrl-C
  bool verbose = false;
  AttachChoice attach = AttachChoice::Auto;
  KernelUnwind kernel_unwind = KernelUnwind::Auto;
  bool verify_kernel_unwind = false; // also take the kernel's walk, compare
  uint32_t kernel_unwind_limit = 0;  // test knob: splice after N frames
  Loader loader = Loader::Auto;
};

// How `offcpu rwsem` watches the rwsem slow path; Auto picks the best the
// kernel allows (fentry, then kprobe, then the contention tracepoints).
enum class RwsemAttach { Auto, Fentry, Kprobe, Tracepoint };

struct RwsemOptions {
  std::string name; // process name (or thread name) to trace
  bool match_thread_name = false;
  std::vector<uint32_t> pids; // instead of, or as well as, a name
  bool include_read = false;
  OutputOptions output;
  double interval_s = 5; // 0: print once at the end
  std::optional<double> duration_s;
  uint64_t min_wait_us = 0;
  uint32_t stack_storage_size = 16384;
  uint32_t max_stack_depth = 127;
  uint32_t max_entries = 65536;
  bool verbose = false;
  RwsemAttach attach = RwsemAttach::Auto;
};

// `offcpu flamegraph [FILE]`: folded lines in, SVG out.
struct FlamegraphOptions {
  std::optional<std::string> input; // none or "-": stdin
  OutputOptions output;
  std::string count_name = "us";
};

enum class Command { Profile, Rwsem, Flamegraph };
enum class Action { Run, PrintedHelp };

struct CommandLine {
  Action action = Action::Run;
  std::string help_text; // with PrintedHelp: --help or --version output
  Command command = Command::Profile;
  ProfileOptions profile;
  RwsemOptions rwsem;
  FlamegraphOptions flamegraph;
};

// Tells whether a PID/TID exists; injected so tests need no real processes.
using TaskExists = std::function<bool(uint32_t)>;
bool task_exists_in_proc(uint32_t id);

// Throws FatalError(kExitUsage) with a one-line message on bad input.
CommandLine parse_command_line(int argc, const char *const *argv,
                               const TaskExists &exists = task_exists_in_proc);

} // namespace offcpu
