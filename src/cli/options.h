// Command-line options: one struct per command, parsed by CLI11. Parsing is
// pure (no kernel, no /proc beyond validating PIDs through a callback) so it
// is unit-tested directly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collect/trace_config.h"
#include "output/lock_table.h"
#include "output/render.h"

namespace offcpu {

// Where and how results are written; shared by the commands.
struct OutputTarget {
  std::string path;
  OutputFormat format;
};

struct OutputOptions {
  OutputFormat format = OutputFormat::Text; // stdout's, without -o
  // Every -o (several: out.svg and out.pb.gz from one run); a known
  // extension picks the file's format. An empty path is stdout (-o -).
  std::vector<OutputTarget> targets;
  bool delimited = false;
  ThreadFrame thread = ThreadFrame::Comm; // --per-pid, --per-thread
  std::string title;       // SVG title; empty: the command's default
  int width = 1200;        // SVG width in pixels
  double min_width = 0.1;  // SVG: narrower frames are left out
  bool histograms = false; // text: latency histograms per stack (-v)
  bool quiet = false;      // no progress line
  // --no-symbolize: user frames in files keep their address only (named
  // later, by pprof servers, from build ids).
  bool symbolize = true;
  // Functions inlined at a frame's address as frames of their own, from
  // DWARF (off: --no-inline).
  bool inline_frames = true;
  // Python functions in place of CPython's evaluation frames (off:
  // --no-python).
  bool python_frames = true;
  // --lines: frames named "function (file.c:123)" from DWARF.
  bool lines = false;
  // --debuginfod-time: what downloads from DEBUGINFOD_URLS may take in a
  // run (0: none).
  double debuginfod_s = 3;
  // Extra roots for separate debug files, searched before /usr/lib/debug.
  std::vector<std::string> debug_dirs;
};

// The main command: what to trace (OffcpuConfig) and how to report it.
struct ProfileOptions : OffcpuConfig {
  // offcpu [options] -- COMMAND ARGS...: run it, trace it and its children.
  std::vector<std::string> command;
  std::string user;      // --user: who the command runs as
  std::string group;     // --group: with which group
  bool keep_fds = false; // --keep-fds: the command inherits fds above 2
  std::vector<std::string> cgroup_paths; // --cgroup, resolved when run
  OutputOptions output;
  std::optional<double> duration_s; // none: until Ctrl-C
  // --name-time: how long the end of the run (after the window closes)
  // may take to name frames; files not read by then show as [module].
  double name_time_s = 0.5;
  bool verbose = false;
  AttachChoice attach = AttachChoice::Auto;
  KernelUnwind kernel_unwind = KernelUnwind::Auto;
  uint32_t top_waits = 0;   // --top-waits N: the N longest waits, as text
  uint32_t chain_depth = 3; // --chain-depth: wake-chain hops per event
};

// `offcpu lock`, and `offcpu rwsem`, its preset (lock_command false).
struct RwsemOptions : RwsemConfig {
  bool lock_command = false; // offcpu lock: kind names, its own report
  LockGrouping by = LockGrouping::Lock;  // offcpu lock --by: the table's rows
  std::vector<std::string> cgroup_paths; // --cgroup, resolved when run
  // offcpu lock -- COMMAND: run it, trace it and its children (as the main
  // command does, with --user, --group, --keep-fds).
  std::vector<std::string> command;
  std::string user, group;
  bool keep_fds = false;
  OutputOptions output;
  double interval_s = 5; // 0: print once at the end
  std::optional<double> duration_s;
  bool verbose = false;
};

// `offcpu flamegraph [FILE]`: folded lines in; SVG, folded or pprof out.
struct FlamegraphOptions {
  std::optional<std::string> input; // none or "-": stdin
  OutputOptions output;
  std::string count_name = "us";
};

enum class Command { Profile, Rwsem, Lock, Flamegraph };
enum class Action { Run, PrintedHelp };

struct CommandLine {
  Action action = Action::Run;
  std::string help_text; // with PrintedHelp: --help or --version output
  Command command = Command::Profile;
  ProfileOptions profile;
  RwsemOptions rwsem;
  RwsemOptions lock;
  FlamegraphOptions flamegraph;
};

// Tells whether a PID/TID exists; injected so tests need no real processes.
using TaskExists = std::function<bool(uint32_t)>;
bool task_exists_in_proc(uint32_t id);

// Throws FatalError(kExitUsage) with a one-line message on bad input.
CommandLine parse_command_line(int argc, const char *const *argv,
                               const TaskExists &exists = task_exists_in_proc);

} // namespace offcpu
