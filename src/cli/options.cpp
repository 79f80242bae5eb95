#include "cli/options.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cli/suggest.h"
#include "model/lock_kinds.h"
#include "offcpu/shared.h"
#include "util/error.h"

namespace offcpu {
namespace {

constexpr uint32_t kMaxStackDepth = OFFCPU_MAX_STACK_DEPTH;
constexpr size_t kMaxOutputs = 16;

double parse_duration(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || end == nullptr || *end != '\0' ||
      !std::isfinite(v) || v <= 0 || v > 365.0 * 24 * 3600)
    throw usage_error("duration must be a positive number of seconds, got '" +
                      text + "'");
  return v;
}

// --state: BCC's numeric bitmask (as it is), or state classes by name,
// exact: R preempted, S sleeping, D uninterruptible but not idle, I idle
// (TASK_IDLE), T stopped/traced/other; "D,S" for several.
void parse_state(const std::string &text, OffcpuConfig &o) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 0);
    if (errno != 0 || *end != '\0' || v < 0 || v > 0xffffffffLL)
      throw usage_error("--state takes a task-state bitmask such as 2 or "
                        "0x402, or state names such as D,S; got '" +
                        text + "'");
    o.state = v;
    return;
  }
  static const char letters[] = "RSDIT"; // offcpu_state_class order
  uint32_t classes = 0;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma - start);
    if (item.empty())
      throw usage_error("--state: empty state name in '" + text +
                        "' (names are R, S, D, I, T)");
    const char *at =
        item.size() == 1
            ? std::strchr(letters,
                          std::toupper(static_cast<unsigned char>(item[0])))
            : nullptr;
    if (!at || !*at)
      throw usage_error("--state names are R (preempted), S (sleeping), D "
                        "(uninterruptible), I (idle), T (stopped); got '" +
                        item + "'");
    classes |= 1u << (at - letters);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  o.state_classes = classes;
}

std::vector<uint32_t> parse_id_list(const std::vector<std::string> &args,
                                    const char *what) {
  std::vector<uint32_t> ids;
  for (const std::string &arg : args) {
    size_t start = 0;
    for (;;) {
      size_t comma = arg.find(',', start);
      std::string item = arg.substr(start, comma - start);
      char *end = nullptr;
      errno = 0;
      unsigned long long v = std::strtoull(item.c_str(), &end, 10);
      // An empty item ("", "1,,2", "1,") would be no filter at all.
      if (item.empty())
        throw usage_error(std::string("empty ") + what + " in '" + arg +
                          "': give a " + what + " or leave the option out");
      if (item[0] == '-' || errno != 0 || *end != '\0' || v > 0x7fffffffULL)
        throw usage_error(std::string("not a valid ") + what + ": '" + item +
                          "'");
      ids.push_back(static_cast<uint32_t>(v));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
  }
  return ids;
}

void check_tasks(const std::vector<uint32_t> &ids, const char *what,
                 const TaskExists &exists) {
  for (uint32_t id : ids) {
    if (id == 0)
      throw usage_error(std::string(what) +
                        " 0 is the idle task; it cannot be traced");
    if (!exists(id))
      throw usage_error(std::string(what) + " " + std::to_string(id) +
                        " does not exist");
  }
}

// A filter given an empty value would match nothing or, as -n "" and
// --cgroup "" did, be dropped and trace everything: refused instead.
CLI::Validator not_empty(const char *what) {
  std::string message = std::string("needs ") + what + ", got an empty value";
  return CLI::Validator(
      [message](std::string &value) {
        return value.empty() ? message : std::string();
      },
      "");
}

// Target selection: what -p, -t and -n were given, in the user's terms.

// -n is matched against the comm, never a path: name what would match.
void check_process_name(const std::string &name, const char *option) {
  if (name.find('/') != std::string::npos) {
    std::string base = name.substr(name.rfind('/') + 1).substr(0, 15);
    throw usage_error(std::string(option) +
                      " takes the process name (comm), not a path: use " +
                      option + " " + (base.empty() ? "NAME" : base));
  }
  if (name.size() > 15)
    throw usage_error("process names are at most 15 characters (the kernel's "
                      "comm), got '" +
                      name + "'");
}

// CLI11 messages can span lines; keep the first.
std::string one_line(const std::string &s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// One token per -p/-t, so a following duration is not swallowed; the comma
// lists are split by parse_id_list with our own messages.
CLI::Option *add_id_list(CLI::App *app, const char *flags,
                         std::vector<std::string> &into, const char *help,
                         const char *type) {
  return app->add_option(flags, into, help)
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name(type);
}

// `sized`: the defaults are sized from the machine's memory at start.
void add_stack_limits(CLI::App *app, uint32_t &storage, uint32_t &depth,
                      uint32_t &entries, const char *group, bool sized) {
  app->add_option("--stack-storage-size", storage,
                  sized ? "distinct stacks to store, and a quarter as many "
                          "of over 32 frames (default: from available "
                          "memory, 1024-65536; an eighth kept for the stop "
                          "pass)"
                        : "distinct stacks to store, and a quarter as many "
                          "of over 32 frames (default 16384)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1} << 24))
      ->group(group);
  app->add_option("--perf-max-stack-depth", depth,
                  "frames to keep per stack (default and maximum 127)")
      ->check(CLI::Range(uint32_t{1}, kMaxStackDepth))
      ->group(group);
  app->add_option(
         "--max-entries", entries,
         sized ? "distinct (thread, stack) entries to aggregate (default: "
                 "from available memory, 4096-262144)"
               : "distinct (thread, stack) entries to aggregate (default "
                 "65536)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1} << 24))
      ->group(group);
}

struct OutputArgs {
  std::string format;
  std::vector<std::string> paths;
  bool folded = false;
  bool per_pid = false, per_thread = false;
  bool no_symbolize = false;
  bool no_inline = false;
  bool no_python = false;
};

bool ends_with(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
}

OutputFormat format_for_path(const std::string &path, OutputFormat fallback) {
  if (ends_with(path, ".svg"))
    return OutputFormat::Svg;
  if (ends_with(path, ".pb.gz") || ends_with(path, ".pprof") ||
      ends_with(path, ".pb"))
    return OutputFormat::Pprof;
  if (ends_with(path, ".folded"))
    return OutputFormat::Folded;
  if (ends_with(path, ".txt"))
    return OutputFormat::Text;
  if (ends_with(path, ".json"))
    return OutputFormat::TraceJson;
  if (ends_with(path, ".perfetto-trace") || ends_with(path, ".pftrace"))
    return OutputFormat::Perfetto;
  return fallback;
}

// -f/--folded, --format, -d, --per-pid/--per-thread, --no-symbolize and
// --debug-dir: how the tracing commands lay out and name what they took.
void add_format_options(CLI::App *app, OutputOptions &o, OutputArgs &a) {
  app->add_flag("-f,--folded", a.folded,
                "folded stacks for flamegraph.pl (same as --format folded)")
      ->group("Output");
  app->add_option("--format", a.format,
                  "text, folded, svg or pprof (default text)")
      ->check(CLI::IsMember({"text", "folded", "svg", "pprof"}))
      ->group("Output");
  app->add_flag("-d,--delimited", o.delimited,
                "insert a '-' frame between user and kernel stacks")
      ->group("Output");
  auto *pid = app->add_flag("--per-pid", a.per_pid,
                            "keep processes apart: the first frame is "
                            "comm-PID (stackcollapse-perf --pid)")
                  ->group("Output");
  app->add_flag("--per-thread", a.per_thread,
                "keep threads apart: the first frame is comm-PID/TID "
                "(stackcollapse-perf --tid)")
      ->group("Output")
      ->excludes(pid);
  app->add_flag("--no-symbolize", a.no_symbolize,
                "leave user frames in files unnamed (file+0xOFFSET; in "
                "pprof: addresses and build ids, for the server to name)")
      ->group("Output");
  app->add_flag("--no-inline", a.no_inline,
                "leave out functions inlined at a frame's address (shown by "
                "default where DWARF is found: the binary's or its debug "
                "file's)")
      ->group("Output");
  app->add_flag("--no-python", a.no_python,
                "show CPython's interpreter frames (_PyEval_EvalFrameDefault) "
                "rather than the Python functions they ran")
      ->group("Output");
  app->add_flag("--lines", o.lines,
                "name user frames 'function (file.c:123)' from DWARF: the "
                "call's line for callers, the current one for the leaf "
                "(pprof output always has lines)")
      ->group("Output");
  app->add_option("--debuginfod-time", o.debuginfod_s,
                  "with DEBUGINFOD_URLS set, how long the run may spend "
                  "fetching debug files local ones lack (default 3; 0: never)")
      ->check(CLI::Range(0.0, 3600.0))
      ->type_name("SECONDS")
      ->group("Output");
  app->add_option(
         "--debug-dir", o.debug_dirs,
         "also look for separate debug files under DIR (like /usr/lib/debug)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("DIR")
      ->check(not_empty("a directory"))
      ->group("Output");
}

// -o, repeatable, and the flame graph's look: every command has them.
void add_file_options(CLI::App *app, OutputOptions &o, OutputArgs &a) {
  app->add_option("-o,--output", a.paths,
                  "write to FILE instead of stdout ('-': stdout); it appears "
                  "only when complete. Repeatable: .svg, .pb.gz, .folded and "
                  ".txt pick their format, .json and .perfetto-trace (or "
                  ".pftrace) the timeline of long waits, other names "
                  "--format's")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("FILE")
      ->group("Output");
  app->add_option("--title", o.title, "flame graph title")->group("Output");
  app->add_option("--width", o.width,
                  "flame graph width in pixels (default 1200)")
      ->check(CLI::Range(200, 100000))
      ->group("Output");
  app->add_option(
         "--minwidth", o.min_width,
         "leave out frames narrower than this many pixels (default 0.1)")
      ->check(CLI::Range(0.0, 1000.0))
      ->group("Output");
}

OutputFormat format_named(const std::string &f) {
  return f == "folded"  ? OutputFormat::Folded
         : f == "svg"   ? OutputFormat::Svg
         : f == "pprof" ? OutputFormat::Pprof
                        : OutputFormat::Text;
}

void finish_output_options(OutputOptions &o, const OutputArgs &a) {
  if (a.folded && !a.format.empty() && a.format != "folded")
    throw usage_error(
        "-f means --format folded; it cannot be combined with --format " +
        a.format);
  o.thread = a.per_thread ? ThreadFrame::Thread
             : a.per_pid  ? ThreadFrame::Process
                          : ThreadFrame::Comm;
  o.format = format_named(a.folded ? "folded" : a.format);
  o.symbolize = !a.no_symbolize;
  o.inline_frames = !a.no_inline;
  o.python_frames = !a.no_python;
  size_t to_stdout = 0;
  for (const std::string &p : a.paths) {
    if (p.empty())
      throw usage_error("-o needs a file name");
    // "-o -": stdout, in --format's format, beside files of other formats.
    if (p == "-" && ++to_stdout > 1)
      throw usage_error("-o - (stdout) given twice");
    o.targets.push_back({p == "-" ? "" : p, format_for_path(p, o.format)});
  }
  if (o.targets.size() > kMaxOutputs)
    throw usage_error("at most " + std::to_string(kMaxOutputs) +
                      " -o files per run");
}

} // namespace

bool task_exists_in_proc(uint32_t id) {
  struct stat st {};
  // /proc/<tid> resolves for threads as well as processes.
  return ::stat(("/proc/" + std::to_string(id)).c_str(), &st) == 0;
}

namespace {

// What CLI11 collects for the main command before it is checked.
struct ProfileArgs {
  std::string duration, state, attach = "auto", unwind = "auto",
                               loader = "auto";
  std::vector<std::string> pids, tids;
  OutputArgs out;
};

struct RwsemArgs {
  std::string duration, attach = "auto";
  std::vector<std::string> pids;
  OutputArgs out;
};

struct LockArgs {
  std::string duration, attach = "auto", by = "lock";
  std::vector<std::string> pids, tids, kinds;
  bool spin = false, futex = false;
  OutputArgs out;
};

struct FlamegraphArgs {
  std::string input;
  OutputArgs out;
};

// What the target options of the main command and of offcpu lock fill.
struct TargetRefs {
  std::vector<std::string> &pids, &tids;
  std::string &name;
  bool &children;
  std::vector<std::string> &cgroups;
  std::string &user, &group;
  bool &keep_fds;
};

// Which tasks are traced: processes, threads, names, cgroups, and the
// command offcpu runs (the main command's and offcpu lock's alike).
void add_targets(CLI::App *app, const TargetRefs &t) {
  add_id_list(
      app, "-p,--pid", t.pids,
      "trace these processes (all threads); comma separated or repeated", "PID")
      ->group("Filters");
  add_id_list(app, "-t,--tid", t.tids,
              "trace these threads; comma separated or repeated", "TID")
      ->group("Filters");
  app->add_option("-n,--name", t.name,
                  "trace processes of this name (their main thread's comm, "
                  "exact), also those that start later")
      ->check(not_empty("a process name"))
      ->group("Filters");
  app->add_flag("--children", t.children,
                "also trace the processes the traced ones fork from now on")
      ->group("Filters");
  app->add_option("--cgroup", t.cgroups,
                  "only tasks in this cgroup (v2) or below: a path under "
                  "/sys/fs/cgroup; repeatable")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("PATH")
      ->check(not_empty("a cgroup path"))
      ->group("Filters");
  app->add_option("--user", t.user,
                  "run the command (after --) as this user (name or uid); "
                  "default: the user who ran sudo")
      ->check(not_empty("a user name or id"))
      ->type_name("USER")
      ->group("Filters");
  app->add_option("--group", t.group,
                  "the command's group (name or gid); default: the user's; "
                  "needed for a --user uid with no passwd entry")
      ->check(not_empty("a group name or id"))
      ->type_name("GROUP")
      ->group("Filters");
  app->add_flag("--keep-fds", t.keep_fds,
                "the command inherits offcpu's file descriptors above 2 "
                "(default: closed, as sudo does)")
      ->group("Filters");
}

void add_profile_targets(CLI::App &app, ProfileOptions &o, ProfileArgs &a) {
  add_targets(&app, {a.pids, a.tids, o.name, o.follow_children, o.cgroup_paths,
                     o.user, o.group, o.keep_fds});
  app.add_flag("--per-cgroup", o.per_cgroup,
               "the cgroup (systemd unit) as the first frame of each stack")
      ->group("Output");
}

// The timeline of long waits: which waits, how much of them, how far
// their wake chains go.
void add_timeline_options(CLI::App &app, ProfileOptions &o) {
  app.add_option("--top-waits", o.top_waits,
                 "print the N longest waits with their time, stacks, waker "
                 "and wake chain")
      ->check(CLI::Range(1u, 1000000u))
      ->type_name("N")
      ->group("Timeline");
  app.add_option("--events-min", o.events_min_us,
                 "timeline: waits of at least this many microseconds "
                 "(default 1000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT64_MAX / 1000}))
      ->type_name("US")
      ->group("Timeline");
  app.add_option("--events-memory", o.events_memory_mib,
                 "timeline: MiB the events may take in offcpu (default 128; "
                 "the kernel's ring buffer gets a sixteenth); past it "
                 "events are dropped and counted")
      ->check(CLI::Range(1u, 65536u))
      ->type_name("MIB")
      ->group("Timeline");
  app.add_option("--chain-depth", o.chain_depth,
                 "timeline: wake-chain hops followed per wait (default 3)")
      ->check(CLI::Range(0u, 64u))
      ->type_name("N")
      ->group("Timeline");
}

// Which of their waits count, and what each wait is split into.
void add_profile_waits(CLI::App &app, ProfileOptions &o, ProfileArgs &a) {
  auto *uth = app.add_flag("-u,--user-threads-only", o.user_threads_only,
                           "user threads only (no kernel threads)")
                  ->group("Filters");
  auto *kth = app.add_flag("-k,--kernel-threads-only", o.kernel_threads_only,
                           "kernel threads only (no user threads)")
                  ->group("Filters");
  uth->excludes(kth);
  app.add_option(
         "-m,--min-block-time", o.min_block_us,
         "only count waits of at least this many microseconds (default 1)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{UINT64_MAX / 1000}))
      ->group("Filters");
  app.add_option("-M,--max-block-time", o.max_block_us,
                 "only count waits of at most this many microseconds")
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT64_MAX}))
      ->group("Filters");
  app.add_option("--state", a.state,
                 "only waits that began in these states: names R (preempted), "
                 "S, D (uninterruptible, not idle), I (idle), T, e.g. D,S; or "
                 "BCC's bitmask (2, 0x402; 0 = preempted)")
      ->check(not_empty("state names or a bitmask"))
      ->group("Filters");
  app.add_flag("--show-state", o.show_state,
               "a frame with the state each wait began in: [S], [D]...")
      ->group("Output");
  app.add_flag("--wakers", o.wakers,
               "who woke each wait: the waker's stacks after a '--' frame, "
               "as BCC's offwaketime, or [timer], [interrupt]...")
      ->group("Output");
  app.add_flag("--runqueue", o.runqueue,
               "split each wait into time blocked and time runnable, waiting "
               "for a CPU ([runqueue] leaf frame)")
      ->group("Output");
  add_timeline_options(app, o);
}

// What the stacks show and where the results go.
void add_profile_output(CLI::App &app, ProfileOptions &o, ProfileArgs &a) {
  auto *us = app.add_flag("-U,--user-stacks-only", o.user_stacks_only,
                          "show user stacks only")
                 ->group("Output");
  auto *ks = app.add_flag("-K,--kernel-stacks-only", o.kernel_stacks_only,
                          "show kernel stacks only")
                 ->group("Output");
  us->excludes(ks);
  add_format_options(&app, o.output, a.out);
  add_file_options(&app, o.output, a.out);
  app.add_flag("-q,--quiet", o.output.quiet, "no progress line on a terminal")
      ->group("Output");
}

// Sizes, how stacks are walked and loaded, and test knobs.
void add_profile_limits(CLI::App &app, ProfileOptions &o, ProfileArgs &a) {
  add_stack_limits(&app, o.stack_storage_size, o.max_stack_depth, o.max_entries,
                   "Limits", true);
  app.add_flag("-v,--verbose", o.verbose,
               "report kernel features, the attach plan and symbolization; "
               "latency histograms in the text report");
  app.add_option("--attach", a.attach,
                 "sched_switch hook: auto, tp_btf or raw_tp (default auto)")
      ->check(CLI::IsMember({"auto", "tp_btf", "raw_tp"}))
      ->group("");
  app.add_option("--kernel-unwind", a.unwind,
                 "kernel stacks: orc (walked when the task runs again, only "
                 "for waits that pass -m/-M), switch-out (the kernel's walk "
                 "on every switch) or auto (orc where possible)")
      ->check(CLI::IsMember({"auto", "orc", "switch-out"}))
      ->group("Limits");
  app.add_flag("--verify-kernel-unwind", o.verify_kernel_unwind,
               "also take the kernel's own walk of each stack and count "
               "disagreements (-v); costs more")
      ->group("Limits");
  app.add_flag("--verify-stack-reuse", o.verify_stack_reuse,
               "walk stacks even where a thread's last one is reused, and "
               "count disagreements (-v); costs more")
      ->group("Limits");
  app.add_flag("--time-walks", o.time_walks,
               "count and time the user stacks reused or walked, by why "
               "they were walked (-v); two clock reads each, a longer load")
      ->group("Limits");
  app.add_flag("--no-stack-reuse", o.no_stack_reuse,
               "walk every stack, never reuse a thread's last one (to "
               "measure what reuse saves)")
      ->group("Limits");
  app.add_option("--loader", a.loader,
                 "who loads the BPF programs: light (the kernel, nothing "
                 "parsed here), light-probe-reads (the same without plain "
                 "loads of kernel memory, as before 6.8), libbpf, or auto "
                 "(where possible the light object's maps and the programs "
                 "verified in two threads at once, else light)")
      ->check(CLI::IsMember({"auto", "light", "light-probe-reads", "libbpf"}))
      ->group("Limits");
  app.add_option_function<std::string>(
         "--user-unwind",
         [&o](const std::string &v) { o.user_unwind_tables = v != "fp"; },
         "user stacks: auto (unwind tables from each file's CFI where the "
         "kernel allows, frame pointers elsewhere) or fp (frame pointers "
         "only)")
      ->check(CLI::IsMember({"auto", "fp"}))
      ->group("Limits");
  app.add_option("--unwind-memory", o.unwind_memory_mib,
                 "kernel memory for user unwind tables at most, MiB "
                 "(default 64); files beyond it are walked with frame "
                 "pointers (counted)")
      ->check(CLI::Range(1u, 4096u))
      ->group("Limits");
  app.add_option("--name-time", o.name_time_s,
                 "seconds the end of the run may take to name frames after "
                 "the window closes (default 0.5); files not read by then "
                 "show as [module] (counted)")
      ->check(CLI::Range(0.0, 3600.0))
      ->type_name("SECONDS")
      ->group("Limits");
  app.add_option("--kernel-unwind-limit", o.kernel_unwind_limit,
                 "hand kernel stacks over to the kernel's walk after N frames")
      ->check(CLI::Range(1u, 127u))
      ->group("");
  app.add_option("--fail-load", o.fail_load,
                 "make these loads fail, to test the fallbacks after them")
      ->check([](const std::string &v) {
        std::string bad;
        for (const std::string &w : CLI::detail::split(v, ','))
          if (w != "split" && w != "light" && w != "light-probe-reads" &&
              w != "tp_btf" && w != "edges" && w != "generated")
            bad = "not one of split, light, light-probe-reads, tp_btf, "
                  "edges, generated: " +
                  w;
        return bad;
      })
      ->group("");
  app.add_option("--delay-edges", o.edges_delay_ms,
                 "load the window edges' programs MS later, to test the "
                 "waits that end or stop before they are loaded")
      ->check(CLI::Range(0u, 60000u))
      ->group("");
}

// The main command, its options in the order --help lists them.
void setup_profile(CLI::App &app, ProfileOptions &o, ProfileArgs &a) {
  add_profile_targets(app, o, a);
  add_profile_waits(app, o, a);
  add_profile_output(app, o, a);
  add_profile_limits(app, o, a);
  app.add_option("duration", a.duration,
                 "seconds to trace (default: until Ctrl-C)");
}

CLI::App *setup_rwsem(CLI::App &app, RwsemOptions &r, RwsemArgs &a) {
  CLI::App *rw = app.add_subcommand(
      "rwsem", "how long threads of a process wait for kernel rw-semaphore "
               "write locks (mmap_lock...), by stack; every -i seconds");
  rw->add_option(
        "name", r.name,
        "process name to trace (its main thread's comm; see --thread-name)")
      ->check(not_empty("a process name"));
  rw->add_option("duration", a.duration,
                 "seconds to trace (default: until Ctrl-C)");
  rw->add_flag("--thread-name", r.match_thread_name,
               "match NAME against thread names instead of the process name");
  add_id_list(rw, "-p,--pid", a.pids,
              "trace these processes; comma separated or repeated", "PID");
  rw->add_flag("--read", r.include_read, "also trace read-side waits");
  rw->add_flag("--wakers", r.wakers,
               "who woke each waiter: the holder's release path (up_write, "
               "up_read) after a '--' frame");
  rw->add_option("-i,--interval", r.interval_s,
                 "print and clear every this many seconds; 0: once at the end "
                 "(default 5)")
      ->check(CLI::Range(0.0, 86400.0));
  rw->add_option("-m,--min-wait", r.min_wait_us,
                 "only count waits of at least this many microseconds")
      ->check(CLI::Range(uint64_t{0}, uint64_t{UINT64_MAX / 1000}));
  add_format_options(rw, r.output, a.out);
  add_file_options(rw, r.output, a.out);
  add_stack_limits(rw, r.stack_storage_size, r.max_stack_depth, r.max_entries,
                   "Limits", false);
  rw->add_flag("-v,--verbose", r.verbose,
               "report the mechanism used and symbolization; latency "
               "histograms in the text report");
  rw->add_option("--attach", a.attach,
                 "fentry, kprobe, tracepoint or auto (default auto)")
      ->check(CLI::IsMember({"auto", "fentry", "kprobe", "tracepoint"}))
      ->group("");
  return rw;
}

// offcpu lock: which tasks (the main command's filters) and which waits.
void add_lock_filters(CLI::App *lk, RwsemOptions &r, LockArgs &a) {
  add_targets(lk, {a.pids, a.tids, r.name, r.follow_children, r.cgroup_paths,
                   r.user, r.group, r.keep_fds});
  lk->add_flag("--thread-name", r.match_thread_name,
               "match -n NAME against thread names instead")
      ->group("Filters");
  auto *uth = lk->add_flag("-u,--user-threads-only", r.user_threads_only,
                           "user threads only (no kernel threads)")
                  ->group("Filters");
  auto *kth = lk->add_flag("-k,--kernel-threads-only", r.kernel_threads_only,
                           "kernel threads only (no user threads)")
                  ->group("Filters");
  uth->excludes(kth);
  lk->add_option("-m,--min-block-time", r.min_wait_us,
                 "only count waits of at least this many microseconds")
      ->check(CLI::Range(uint64_t{0}, uint64_t{UINT64_MAX / 1000}))
      ->group("Filters");
  lk->add_option("-M,--max-block-time", r.max_wait_us,
                 "only count waits of at most this many microseconds")
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT64_MAX / 1000}))
      ->group("Filters");
  lk->add_option("-Y,--kinds", a.kinds,
                 "only these kinds of lock, comma separated: mutex, rwsem "
                 "(or rwsem:read, rwsem:write), semaphore, rtmutex, "
                 "percpu-rwsem, rwlock-rt, and with spinning mutex:spin, "
                 "spinlock, rwlock; user space: futex (or futex:pi)")
      ->delimiter(',')
      ->expected(1) // `-Y mutex 5`: 5 is the duration, not a kind
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KIND")
      ->group("Filters");
  lk->add_flag("--spin", a.spin,
               "also spinning waits (on CPU): mutex:spin, spinlock, rwlock, "
               "each its own kind")
      ->group("Filters");
  lk->add_flag("--futex", a.futex,
               "also user-space lock waits: time asleep in futex calls, by "
               "the futex word (named by its variable where the binary's "
               "symbols have one), kinds futex and futex:pi")
      ->group("Filters");
}

CLI::App *setup_lock(CLI::App &app, RwsemOptions &r, LockArgs &a) {
  CLI::App *lk = app.add_subcommand(
      "lock", "how long threads wait for kernel locks (mutexes, "
              "rw-semaphores...), by stack, kind and lock");
  lk->add_option("duration", a.duration,
                 "seconds to trace (default: until Ctrl-C)");
  add_lock_filters(lk, r, a);
  lk->add_flag("--holders,--wakers", r.wakers,
               "who held the lock: the stack of the task that released it to "
               "each waiter (mutex_unlock, up_write...) after a '--' frame, "
               "its comm last; and the owner the lock recorded, where another")
      ->group("Output");
  lk->add_option("--by", a.by,
                 "the text report's rows: lock (default), caller (the kernel "
                 "function that waited), thread or cgroup (the waiter's; "
                 "folded stacks then begin with it)")
      ->check(CLI::IsMember({"lock", "caller", "thread", "cgroup"}))
      ->group("Output");
  lk->add_option("-i,--interval", r.interval_s,
                 "print and clear every this many seconds; 0: once at the end "
                 "(default 0)")
      ->check(CLI::Range(0.0, 86400.0))
      ->group("Output");
  add_format_options(lk, r.output, a.out);
  add_file_options(lk, r.output, a.out);
  add_stack_limits(lk, r.stack_storage_size, r.max_stack_depth, r.max_entries,
                   "Limits", false);
  lk->add_flag("-v,--verbose", r.verbose,
               "report the mechanism used and symbolization; latency "
               "histograms in the text report");
  lk->add_option("--attach", a.attach,
                 "fentry, kprobe, tracepoint or auto (default auto)")
      ->check(CLI::IsMember({"auto", "fentry", "kprobe", "tracepoint"}))
      ->group("");
  return lk;
}

CLI::App *setup_flamegraph(CLI::App &app, FlamegraphOptions &fg,
                           FlamegraphArgs &a) {
  CLI::App *fga = app.add_subcommand(
      "flamegraph",
      "draw an SVG flame graph from folded stacks (offcpu -f, BCC, "
      "stackcollapse-perf) read from FILE or stdin; or write them merged "
      "as folded text or pprof");
  fga->add_option("file", a.input, "folded stacks (default: stdin)");
  fga->add_option("--format", a.out.format,
                  "svg, folded or pprof (default svg)")
      ->check(CLI::IsMember({"svg", "folded", "pprof"}))
      ->group("Output");
  add_file_options(fga, fg.output, a.out);
  fga->add_option("--countname", fg.count_name,
                  "unit of the values (default us)")
      ->group("Output");
  return fga;
}

// The timeline is the main command's alone: offcpu rwsem and offcpu
// flamegraph have no waits one by one.
void refuse_timeline(const OutputOptions &o, const char *command) {
  for (const OutputTarget &t : o.targets)
    if (t.format == OutputFormat::TraceJson ||
        t.format == OutputFormat::Perfetto)
      throw usage_error(std::string(command) +
                        " writes no timeline (.json, .perfetto-trace): '" +
                        t.path + "'");
}

void finish_flamegraph(FlamegraphOptions &fg, FlamegraphArgs &a) {
  if (a.out.format.empty())
    a.out.format = "svg";
  finish_output_options(fg.output, a.out);
  refuse_timeline(fg.output, "offcpu flamegraph");
  // Folded stacks have no thread ids or wait counts: the report cannot be
  // written from them.
  for (const OutputTarget &t : fg.output.targets)
    if (t.format == OutputFormat::Text)
      throw usage_error("offcpu flamegraph writes svg, folded or pprof (.svg, "
                        ".folded, .pb.gz), not text: '" +
                        t.path + "'");
  if (!a.input.empty() && a.input != "-")
    fg.input = a.input;
}

RwsemAttach rwsem_attach(const std::string &name) {
  if (name == "fentry")
    return RwsemAttach::Fentry;
  if (name == "kprobe")
    return RwsemAttach::Kprobe;
  if (name == "tracepoint")
    return RwsemAttach::Tracepoint;
  return RwsemAttach::Auto;
}

void finish_rwsem(RwsemOptions &r, RwsemArgs &a, const TaskExists &exists) {
  finish_output_options(r.output, a.out);
  refuse_timeline(r.output, "offcpu rwsem");
  r.pids = parse_id_list(a.pids, "PID");
  // `rwsem -p PID 10`: with -p the lone positional is the duration.
  if (!r.pids.empty() && a.duration.empty() && !r.name.empty() &&
      r.name.find_first_not_of("0123456789.") == std::string::npos) {
    a.duration = r.name;
    r.name.clear();
  }
  if (!a.duration.empty())
    r.duration_s = parse_duration(a.duration);
  if (r.name.empty() && r.pids.empty())
    throw usage_error(
        "rwsem needs a process NAME or -p PID (see offcpu rwsem --help)");
  check_process_name(r.name, "rwsem");
  r.attach = rwsem_attach(a.attach);
  check_tasks(r.pids, "PID", exists);
}

// -- COMMAND against the other target options (the main command's and
// offcpu lock's): a command is traced with its children, alone.
void check_command_targets(const std::vector<std::string> &command,
                           const std::vector<uint32_t> &pids,
                           const std::vector<uint32_t> &tids,
                           const std::string &name, const std::string &user,
                           const std::string &group, bool keep_fds,
                           bool &follow_children) {
  if (!command.empty()) {
    if (!pids.empty() || !tids.empty() || !name.empty())
      throw usage_error("with a command after --, offcpu traces that command "
                        "and its children: leave out -p, -t and -n");
    follow_children = true;
    return;
  }
  if (!user.empty() || !group.empty() || keep_fds)
    throw usage_error(std::string(!user.empty()    ? "--user"
                                  : !group.empty() ? "--group"
                                                   : "--keep-fds") +
                      " is for the command given after --");
  if (follow_children && pids.empty())
    throw usage_error("--children follows the processes of -p PID");
}

// -Y names, --spin: the kinds as offcpu_lock_kind bits.
uint32_t parse_lock_kinds(const std::vector<std::string> &names, bool spin,
                          bool futex) {
  uint32_t kinds = 0;
  for (const std::string &n : names) {
    auto bits = lock_kinds_named(n);
    if (!bits)
      throw usage_error("-Y: unknown lock kind '" + n +
                        "' (kinds: " + lock_kind_names() + ")");
    kinds |= *bits;
  }
  if (!kinds)
    kinds = OFFCPU_LOCK_SLEEPING;
  // --spin: every spinning kind; with -Y, a mutex's spinning phase (the
  // other spinning kinds are named with -Y).
  if (spin && names.empty())
    kinds |= OFFCPU_LOCK_SPINNING;
  else if (spin && (kinds & (1u << OFFCPU_LOCK_MUTEX)))
    kinds |= 1u << OFFCPU_LOCK_MUTEX_SPIN;
  if (futex)
    kinds |= OFFCPU_LOCK_FUTEXES;
  return kinds;
}

void finish_lock(RwsemOptions &r, LockArgs &a, const TaskExists &exists) {
  r.lock_command = true;
  finish_output_options(r.output, a.out);
  r.pids = parse_id_list(a.pids, "PID");
  r.tids = parse_id_list(a.tids, "TID");
  if (!a.duration.empty())
    r.duration_s = parse_duration(a.duration);
  if (r.min_wait_us > r.max_wait_us)
    throw usage_error("--min-block-time must not exceed --max-block-time");
  r.lock_kinds = parse_lock_kinds(a.kinds, a.spin, a.futex);
  r.by = a.by == "caller"   ? LockGrouping::Caller
         : a.by == "thread" ? LockGrouping::Thread
         : a.by == "cgroup" ? LockGrouping::Cgroup
                            : LockGrouping::Lock;
  r.key_cgroup = r.by == LockGrouping::Cgroup;
  check_process_name(r.name, "-n");
  r.attach = rwsem_attach(a.attach);
  check_tasks(r.pids, "PID", exists);
  check_tasks(r.tids, "TID", exists);
  check_command_targets(r.command, r.pids, r.tids, r.name, r.user, r.group,
                        r.keep_fds, r.follow_children);
}

void finish_profile(ProfileOptions &o, ProfileArgs &a,
                    const TaskExists &exists) {
  finish_output_options(o.output, a.out);
  o.events = o.top_waits > 0;
  for (const OutputTarget &t : o.output.targets)
    o.events = o.events || t.format == OutputFormat::TraceJson ||
               t.format == OutputFormat::Perfetto;
  o.pids = parse_id_list(a.pids, "PID");
  o.tids = parse_id_list(a.tids, "TID");
  if (!a.duration.empty())
    o.duration_s = parse_duration(a.duration);
  if (!a.state.empty())
    parse_state(a.state, o);
  if (o.min_block_us > o.max_block_us)
    throw usage_error("--min-block-time must not exceed --max-block-time");
  o.loader = a.loader == "light"               ? Loader::Light
             : a.loader == "light-probe-reads" ? Loader::LightProbeReads
             : a.loader == "libbpf"            ? Loader::Libbpf
                                               : Loader::Auto;
  o.kernel_unwind = a.unwind == "orc"          ? KernelUnwind::Orc
                    : a.unwind == "switch-out" ? KernelUnwind::SwitchOut
                                               : KernelUnwind::Auto;
  o.attach = a.attach == "tp_btf"   ? AttachChoice::TpBtf
             : a.attach == "raw_tp" ? AttachChoice::RawTp
                                    : AttachChoice::Auto;
  check_tasks(o.pids, "PID", exists);
  check_tasks(o.tids, "TID", exists);
  check_process_name(o.name, "-n");
  check_command_targets(o.command, o.pids, o.tids, o.name, o.user, o.group,
                        o.keep_fds, o.follow_children);
}

// Every long option any command knows, without its dashes.
std::vector<std::string> long_names(CLI::App &app) {
  std::vector<std::string> names;
  auto add = [&names](CLI::App *a) {
    for (const CLI::Option *opt : a->get_options())
      for (const std::string &n : opt->get_lnames())
        names.push_back(n);
  };
  add(&app);
  for (CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
    add(sub);
  return names;
}

std::string option_name(const char *arg, size_t dashes) {
  std::string name = arg + dashes;
  return name.substr(0, name.find('='));
}

// "-pid 1234" would be -p with "id" as its value: a long option written
// with one dash is told so before CLI11 splits it.
void check_single_dash(const std::vector<const char *> &args,
                       const std::vector<std::string> &known) {
  for (size_t i = 1; i < args.size(); i++) {
    const char *a = args[i];
    if (a[0] != '-' || a[1] == '-' || std::strlen(a) < 3 ||
        std::isdigit(static_cast<unsigned char>(a[1])))
      continue;
    std::string name = option_name(a, 1);
    if (std::find(known.begin(), known.end(), name) != known.end())
      throw usage_error(std::string(a) +
                        ": long options take two dashes: did you mean --" +
                        name + "?");
  }
}

// After CLI11 refused the command line: a mistyped long option gets the
// known one it is closest to.
std::string did_you_mean(const std::vector<const char *> &args,
                         const std::vector<std::string> &known) {
  for (size_t i = 1; i < args.size(); i++) {
    if (std::strncmp(args[i], "--", 2) != 0)
      continue;
    std::string name = option_name(args[i], 2);
    if (name.empty() ||
        std::find(known.begin(), known.end(), name) != known.end())
      continue;
    std::string best = closest_name(name, known);
    if (!best.empty())
      return "unknown option --" + name + ": did you mean --" + best + "?";
  }
  return {};
}

} // namespace

CommandLine parse_command_line(int argc, const char *const *argv,
                               const TaskExists &exists) {
  CommandLine cl;
  // offcpu [options] -- COMMAND ARGS...: the command is not ours to parse.
  std::vector<const char *> ours(argv, argv + argc);
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--") == 0) {
      cl.profile.command.assign(argv + i + 1, argv + argc);
      ours.assign(argv, argv + i);
      if (cl.profile.command.empty())
        throw usage_error("nothing to run after '--'");
      break;
    }
  }
  argc = static_cast<int>(ours.size());
  argv = ours.data();
  CLI::App app{"offcpu: where threads spend their time off CPU, by stack.\n"
               "Traces the whole system unless -p or -t is given, for DURATION "
               "seconds or until Ctrl-C.",
               "offcpu"};
  app.set_version_flag("-V,--version", "offcpu " OFFCPU_VERSION);
  app.get_formatter()->column_width(34);
  ProfileArgs profile_args;
  RwsemArgs rwsem_args;
  LockArgs lock_args;
  FlamegraphArgs flamegraph_args;
  setup_profile(app, cl.profile, profile_args);
  CLI::App *rw = setup_rwsem(app, cl.rwsem, rwsem_args);
  cl.lock.interval_s = 0; // lock reports once at the end unless -i
  CLI::App *lk = setup_lock(app, cl.lock, lock_args);
  CLI::App *fga = setup_flamegraph(app, cl.flamegraph, flamegraph_args);

  const std::vector<std::string> known = long_names(app);
  check_single_dash(ours, known);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    cl.action = Action::PrintedHelp;
    cl.help_text = rw->parsed()    ? rw->help()
                   : lk->parsed()  ? lk->help()
                   : fga->parsed() ? fga->help()
                                   : app.help();
    return cl;
  } catch (const CLI::CallForVersion &) {
    cl.action = Action::PrintedHelp;
    cl.help_text = std::string("offcpu ") + OFFCPU_VERSION + "\n";
    return cl;
  } catch (const CLI::ParseError &e) {
    std::string hint = did_you_mean(ours, known);
    throw usage_error((hint.empty() ? one_line(e.what()) : hint) +
                      " (see offcpu --help)");
  }

  if ((fga->parsed() || rw->parsed()) && !cl.profile.command.empty())
    throw usage_error(
        "a command after -- is for the main command and offcpu lock only");
  if (lk->parsed())
    cl.lock.command = std::move(cl.profile.command);
  if (fga->parsed()) {
    cl.command = Command::Flamegraph;
    finish_flamegraph(cl.flamegraph, flamegraph_args);
  } else if (rw->parsed()) {
    cl.command = Command::Rwsem;
    finish_rwsem(cl.rwsem, rwsem_args, exists);
  } else if (lk->parsed()) {
    cl.command = Command::Lock;
    finish_lock(cl.lock, lock_args, exists);
  } else {
    finish_profile(cl.profile, profile_args, exists);
  }
  return cl;
}

} // namespace offcpu
