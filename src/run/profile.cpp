#include "run/profile.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "collect/cgroups.h"
#include "collect/offcpu_session.h"
#include "collect/rewalker.h"
#include "collect/self_cost.h"
#include "output/top_waits.h"
#include "probe/features.h"
#include "run/command.h"
#include "run/outputs.h"
#include "run/preamble.h"
#include "run/report.h"
#include "symbolize/kernel_namer.h"
#include "symbolize/name_samples.h"
#include "symbolize/name_timeline.h"
#include "symbolize/proc_maps.h"
#include "symbolize/symbolizer.h"
#include "unwind/unwinder.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/messages.h"
#include "util/priority.h"
#include "util/signals.h"

namespace offcpu {
namespace {

std::string target_description(const ProfileOptions &o) {
  if (!o.command.empty())
    return o.command[0] + " and its children";
  std::string s;
  auto list = [](const std::vector<uint32_t> &ids) {
    std::string r;
    for (uint32_t id : ids)
      r += (r.empty() ? "" : ",") + std::to_string(id);
    return r;
  };
  if (!o.pids.empty())
    s += "PID " + list(o.pids);
  if (!o.tids.empty())
    s += (s.empty() ? "" : " and ") + std::string("TID ") + list(o.tids);
  if (!o.name.empty())
    s += (s.empty() ? "" : " and ") + std::string("processes named '") +
         o.name + "'";
  if (o.follow_children)
    s += " and their children";
  if (!o.cgroup_paths.empty()) {
    s += (s.empty() ? "all threads" : "") + std::string(" in cgroup");
    for (const std::string &c : o.cgroup_paths)
      s += " " + c;
  }
  if (s.empty())
    s = "all threads";
  if (o.user_threads_only)
    s += " (user threads only)";
  if (o.kernel_threads_only)
    s += " (kernel threads only)";
  return s;
}

// -p takes processes: the filter matches a thread's process (its tgid), so
// a thread's id given there would match nothing, silently.
void check_pids_are_processes(const std::vector<uint32_t> &pids) {
  for (uint32_t pid : pids) {
    const std::string id = std::to_string(pid);
    auto status = system_files().read("/proc/" + id + "/status", 4096);
    size_t at = status ? status->find("\nTgid:") : std::string::npos;
    if (at == std::string::npos)
      continue; // gone: the filter finds nothing either way
    const unsigned long tgid =
        std::strtoul(status->c_str() + at + 6, nullptr, 10);
    if (tgid != 0 && tgid != pid)
      throw usage_error("-p " + id + ": " + id + " is a thread of process " +
                        std::to_string(tgid) + ": use -t " + id +
                        " for this thread, or -p " + std::to_string(tgid) +
                        " for the whole process");
  }
}

// -n that matched nothing the whole run says so: an empty report is
// otherwise the same as a mistyped name.
bool name_unmatched(const ProfileOptions &opts, const RawProfile &raw) {
  if (opts.name.empty())
    return false;
  auto listed = [](const std::vector<uint32_t> &ids, uint32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  for (const auto &[key, value] : raw.counts)
    if (!listed(opts.pids, key.tgid) && !listed(opts.tids, key.pid))
      return false;
  return true;
}

void report_unmatched_name(const ProfileOptions &opts) {
  warn("no process named '" + opts.name +
       "' waited off CPU during the run: -n matches the process name "
       "exactly as `ps -e -o comm` shows it");
}

// When the window closed: at its planned end, at a stop signal, or when
// the wait for it ended (the traced command exited), whichever came first.
// The end of the run is counted from there, however long the work in
// progress then took to notice.
uint64_t window_closed_ns(uint64_t planned_stop_ns, uint64_t left_loop_ns) {
  uint64_t closed = left_loop_ns;
  if (planned_stop_ns)
    closed = std::min(closed, planned_stop_ns);
  if (uint64_t at_signal = stop_signal_ns())
    closed = std::min(closed, at_signal);
  return closed;
}

// What building the tables of the processes named by -p/-n may add to
// the start-up (and those of -- COMMAND's files to its release): a small C
// program's take a few ms, python3's tens; a costly file (libLLVM: 600 ms on a
// loaded VM) is cut there and built whole after the window opens.
constexpr uint64_t kTablesBeforeWindowNs = 200000000;

// The processes whose name (comm) is `name` now, for -n.
std::vector<uint32_t> processes_named(const std::string &name) {
  std::vector<uint32_t> out;
  DIR *d = opendir("/proc");
  if (!d)
    return out;
  while (const dirent *e = readdir(d)) {
    char *end = nullptr;
    const unsigned long pid = std::strtoul(e->d_name, &end, 10);
    if (!end || *end != '\0' || pid == 0 || pid >= UINT32_MAX)
      continue;
    auto comm =
        system_files().read(std::string("/proc/") + e->d_name + "/comm", 64);
    if (comm && *comm == name + "\n")
      out.push_back(static_cast<uint32_t>(pid));
  }
  closedir(d);
  return out;
}

// The files -- COMMAND maps from its first instruction on, whose tables
// are built before the window opens: the program, and the C library and
// dynamic loader offcpu itself was linked with (a dynamically linked
// command maps the same files; its first waits are in them).
std::vector<std::string> command_files(const std::string &program) {
  std::vector<std::string> out{program};
  auto maps = system_files().read("/proc/self/maps", 1u << 20);
  if (!maps)
    return out;
  for (const Mapping &m : parse_proc_maps(*maps)) {
    if (!m.executable || !m.is_file() || m.deleted())
      continue;
    const std::string name = m.display_name();
    if ((name.rfind("libc.so.", 0) == 0 || name.rfind("ld-linux", 0) == 0) &&
        std::find(out.begin(), out.end(), m.path) == out.end())
      out.push_back(m.path);
  }
  return out;
}

std::string ms_between(uint64_t a, uint64_t b) {
  return std::to_string((b - a) / 1000000);
}

// Probes the kernel, loads the programs along the plans and attaches them:
// the window opens then. The user unwind tables are sized for the traced
// processes first, and filled after the attach (see collect).
std::unique_ptr<OffcpuSession> start_session(const ProfileOptions &opts,
                                             Unwinder &unwinder) {
  const uint64_t t_start = monotonic_ns();
  KernelFeatures features = probe_kernel_features();
  const uint64_t t_probed = monotonic_ns();
  require_btf(features.btf);
  if (opts.verbose)
    note("kernel: " + describe_features(features));
  auto plans = offcpu_plans(features, opts.attach, opts.kernel_unwind);
  OffcpuConfig config = opts;
  for (OffcpuPlan &p : plans)
    p.user_unwind_tables = p.user_unwind_tables && opts.user_unwind_tables &&
                           !opts.kernel_stacks_only;
  if (!plans.empty() && plans[0].user_unwind_tables)
    config.unwind_sizes = unwinder.plan(opts.pids);
  auto session = OffcpuSession::load(config, plans, opts.verbose);
  if (stop_requested())
    return nullptr;
  const uint64_t t_loaded = monotonic_ns();
  if (session->plan().user_unwind_tables) {
    unwinder.attach(session->unwind_maps(), config.unwind_sizes);
    // The walker's requests are read by the rewalker (collect()). The
    // processes named by -p and -n get their tables before the window
    // opens, so that their first waits are walked whole; what the budget
    // leaves is built while tracing.
    std::vector<uint32_t> first = opts.pids;
    if (!opts.name.empty())
      for (uint32_t pid : processes_named(opts.name))
        first.push_back(pid);
    // Tracing every process (or cgroups of them), a process's other files
    // get their tables once a walk reaches them.
    unwinder.defer_files(opts.pids.empty() && opts.name.empty() &&
                         opts.tids.empty() && opts.command.empty());
    for (uint32_t pid : first)
      unwinder.request(pid);
    if (!first.empty())
      unwinder.work_ahead(kTablesBeforeWindowNs);
    if (stop_requested())
      return nullptr;
  }
  const uint64_t t_tables = monotonic_ns();
  session->attach(opts.duration_s ? *opts.duration_s : -1.0);
  // A table still being built when the window closes is dropped.
  unwinder.stop_at(session->planned_stop_ns());
  if (opts.verbose) {
    const uint64_t opened = session->window_start_ns();
    note("attached after " + ms_between(t_start, opened) + " ms: probe " +
         ms_between(t_start, t_probed) + ", load " +
         ms_between(t_probed, t_loaded) + ", unwind tables " +
         ms_between(t_loaded, t_tables) + ", attach " +
         ms_between(t_tables, opened) + "; window opened then");
  }
  return session;
}

void announce_tracing(const ProfileOptions &opts) {
  std::string what = "Tracing off-CPU time (us) of " + target_description(opts);
  if (opts.duration_s) {
    char secs[32];
    snprintf(secs, sizeof(secs), "%g", *opts.duration_s);
    what += std::string(" for ") + secs + " s";
  }
  note(what + (opts.duration_s ? "... Hit Ctrl-C to end early."
                               : "... Hit Ctrl-C to end."));
}

// The waits already in progress opened at once, still at the start-up's
// priority (`startup`, let go after): a wait open at the attach that ends
// before this pass reaches its thread is not seen, and on a loaded host
// the pass came 15 ms late once, behind the banner. Then the banner, then
// the window edges' load (under SCHED_FIFO, startup.py --rt, a loader
// started first held the banner's CPU for its whole load).
void start_tracing(OffcpuSession &session, const ProfileOptions &opts,
                   std::unique_ptr<PriorityBoost> &startup) {
  session.seed_open_waits();
  const uint64_t seeded = monotonic_ns();
  startup.reset(); // back to kTracingNice
  if (opts.verbose)
    note("waits already in progress seeded " +
         ms_between(session.window_start_ns(), seeded) +
         " ms after the attach");
  announce_tracing(opts);
  session.start_edges();
}

void show_progress(const OffcpuSession &session, const SelfCost &cost,
                   double total) {
  const uint64_t elapsed_ns = monotonic_ns() - session.window_start_ns();
  const double elapsed = static_cast<double>(elapsed_ns) / 1e9;
  OffcpuSession::Progress p = session.progress();
  CostReport c = cost.report(elapsed_ns);
  char secs[32], share[48] = "";
  if (total < 0)
    snprintf(secs, sizeof(secs), "%.0f s", elapsed);
  else
    snprintf(secs, sizeof(secs), "%.0f/%.0f s", elapsed, total);
  if (c.available)
    snprintf(share, sizeof(share), ", offcpu %.2f%% CPU", c.cpu_share * 100);
  char line[200];
  snprintf(line, sizeof(line), "\roffcpu: %s, %llu waits, %llu stacks%s\033[K",
           secs, static_cast<unsigned long long>(p.waits),
           static_cast<unsigned long long>(p.keys), share);
  fputs(line, stderr);
}

// Processes looked at for a Python interpreter, for the BPF walker: decided
// once each (issue #32). A Python whose version has no known layout is
// said once, on stderr.
void tell_python(OffcpuSession &session, Symbolizer &symbolizer) {
  for (const auto &[tgid, py] : symbolizer.take_python_decisions()) {
    session.set_python(tgid, py.bpf);
    static std::set<std::string> said;
    if (!py.unsupported.empty() && said.insert(py.unsupported).second)
      warn(py.unsupported);
  }
}

// What Python frames the walker lost, by cause: one line by default, the
// counts with -v.
std::string describe_python(const std::array<uint64_t, OFFCPU_PY_STAT_NR> &c,
                            const PythonNameStats &names, bool verbose) {
  std::string out;
  uint64_t lost = c[OFFCPU_PY_FAULT] + c[OFFCPU_PY_DEPTH] +
                  c[OFFCPU_PY_NO_ROOM] + names.code_unreadable +
                  names.code_over_budget;
  if (lost)
    out += "offcpu: warning: Python frames lost in " + std::to_string(lost) +
           " cases (" + std::to_string(c[OFFCPU_PY_FAULT]) +
           " chains cut by an unreadable word, " +
           std::to_string(c[OFFCPU_PY_DEPTH]) + " deeper than " +
           std::to_string(OFFCPU_PY_MAX_FRAMES) + " frames or the stack, " +
           std::to_string(c[OFFCPU_PY_NO_ROOM]) +
           " with no room after the native frames, " +
           std::to_string(names.code_unreadable) +
           " code objects unreadable, " +
           std::to_string(names.code_over_budget) +
           " not read: their process had used its " +
           std::to_string(kPythonBytesPerProcess >> 20) + " MiB)\n";
  if (verbose && c[OFFCPU_PY_CHAINS])
    out += "offcpu: Python: " + std::to_string(c[OFFCPU_PY_CHAINS]) +
           " chains walked, " + std::to_string(c[OFFCPU_PY_FRAMES]) +
           " frames, " + std::to_string(c[OFFCPU_PY_CHECKED]) +
           " walked only to check a thread's last stack, " +
           std::to_string(c[OFFCPU_PY_NO_THREAD]) +
           " threads without a thread state, " +
           std::to_string(names.code_objects) + " code objects read\n";
  return out;
}

// Waits out the window; on a terminal, one line updated in place.
// Processes announced by the kernel get their maps read and files opened
// now, while they exist; files are parsed between polls.
// An announced (process, user stack) pair: the process's maps read while
// it lives, the stack's addresses noted for naming.
OffcpuSession::NewStack stack_noter(OffcpuSession &session,
                                    Symbolizer &symbolizer) {
  return [&session, &symbolizer](uint32_t tgid, uint64_t stack,
                                 uint32_t parent) {
    symbolizer.note_user_stack(tgid, stack, session.read_stack(stack), parent);
    tell_python(session, symbolizer);
  };
}

void collect(OffcpuSession &session, const ProfileOptions &opts,
             Symbolizer &symbolizer, Unwinder &unwinder, const SelfCost &cost,
             const OffcpuSession::Finished &finished) {
  const OffcpuSession::NewStack remember = stack_noter(session, symbolizer);
  // A blocked thread's stack walked before its process's tables were ready
  // is walked again while it still sleeps, by the rewalker's thread: at
  // each install, and where the walk can find files' tables from a
  // process's mappings (find_vma) at each request, before the install.
  std::unique_ptr<Rewalker> rewalker;
  if (session.plan().user_unwind_tables)
    rewalker = std::make_unique<Rewalker>(
        session.unwind_requests_fd(),
        [&session] { return session.rewalk_user_stacks(); },
        session.plan().find_vma);
  // A process asked for is alive now: its maps are read for naming at
  // once too. Its stacks may be walked through its files' tables before
  // its own are installed, and it may exit before any of them reaches
  // user space (short-lived processes on a loaded host, issue 27).
  auto asked = [&unwinder, &symbolizer](const uw_request &r) {
    unwinder.request(r.tgid, r.pc);
    symbolizer.note_process(r.tgid);
  };
  if (rewalker && !rewalker->reads_requests()) // it could not start
    session.on_unwind_request(asked);
  else if (rewalker) // its requests handled at once, not at the next poll
    session.wake_on(rewalker->requests_event());
  auto parse = [&](uint64_t deadline) {
    if (rewalker)
      for (const uw_request &r : rewalker->take_requests())
        asked(r);
    bool tables_done = unwinder.work(deadline);
    if (unwinder.take_installed() && rewalker)
      rewalker->installed();
    return symbolizer.parse_pending(deadline) && tables_done;
  };
  const double total = opts.duration_s ? *opts.duration_s : -1.0;
  const uint64_t deadline = session.planned_stop_ns(); // 0: until Ctrl-C
  bool progress =
      !opts.output.quiet && isatty(STDERR_FILENO) && (total < 0 || total >= 2);
  if (!progress) {
    session.wait(deadline, remember, parse, finished);
  } else {
    for (;;) {
      uint64_t now = monotonic_ns();
      uint64_t step_end = now + 1000000000;
      if (deadline && step_end > deadline)
        step_end = deadline;
      if ((deadline && now >= deadline) ||
          session.wait(step_end, remember, parse, finished))
        break;
      show_progress(session, cost, total);
    }
    fputs("\r\033[K", stderr);
  }
  if (rewalker && opts.verbose) {
    const Rewalker::Stats st = rewalker->stats();
    note("rewalk: " + std::to_string(st.passes) + " passes, " +
         std::to_string(st.cpu_ns / 1000000) + " ms CPU");
  }
}

// Names every frame of what the session collected; consumes raw.counts.
Profile build_profile(RawProfile &raw, const RawTimeline &events,
                      Symbolizer &symbolizer, const ProfileOptions &opts,
                      int64_t wall_start) {
  std::map<uint64_t, std::string> cgroups;
  if (opts.per_cgroup) {
    std::vector<uint64_t> ids;
    for (const auto &kv : raw.counts)
      ids.push_back(kv.first.cgroup);
    for (auto &[id, path] : cgroup_paths(ids))
      cgroups[id] = cgroup_label(path);
  }
  std::string fallback;
  std::vector<uint64_t> addrs = kernel_addresses(raw.counts, raw.stacks);
  auto add_stack = [&](uint64_t id) {
    if (auto it = raw.stacks.find(id); it != raw.stacks.end())
      addrs.insert(addrs.end(), it->second.begin(), it->second.end());
  };
  for (const auto &[id, waker] : raw.wakers) // --wakers: theirs too
    add_stack(waker.kernel_stack);
  for (const offcpu_event &e : events.events) { // and the timeline's
    add_stack(e.kernel_stack);
    add_stack(e.hop.kernel_stack);
  }
  symbolizer.set_kernel_symbols(
      kernel_symbols_for(addrs, {}, system_files(), &fallback));
  if (!fallback.empty() && opts.verbose)
    note("kernel frames named from /proc/kallsyms: " + fallback);
  if (symbolizer.kernel_symbols().addresses_hidden())
    warn("/proc/kallsyms shows no addresses; kernel frames will be "
         "[unknown] (kernel.kptr_restrict)");
  Profile p;
  p.kind = ProfileKind::OffCpu;
  p.user_symbolized = opts.output.symbolize;
  p.time_nanos = wall_start;
  p.duration_nanos = static_cast<int64_t>(raw.window_ns);
  p.comment =
      "offcpu " OFFCPU_VERSION ": off-CPU time of " + target_description(opts);
  p.runqueue = opts.runqueue;
  p.state_ns.assign(raw.state_ns.begin(), raw.state_ns.end());
  add_offcpu_samples(p, raw, symbolizer,
                     {!opts.kernel_stacks_only, !opts.user_stacks_only},
                     cgroups);
  return p;
}

TimelineSetup timeline_setup(const ProfileOptions &opts,
                             const OffcpuSession &session,
                             const RawProfile &raw) {
  TimelineSetup s;
  s.chain_depth = opts.chain_depth;
  s.events_min_ns = opts.events_min_us * 1000;
  s.window_start_ns = session.window_start_ns();
  s.window_end_ns = session.window_start_ns() + raw.window_ns;
  s.realtime_offset_ns = wall_clock_ns() - static_cast<int64_t>(monotonic_ns());
  return s;
}

// --top-waits: after the other outputs, on stdout.
void write_top_waits(const Timeline &t, uint32_t n) {
  const std::string text = render_top_waits(t, n);
  fwrite(text.data(), 1, text.size(), stdout);
  fflush(stdout);
}

// How often a thread's last stacks were reused (bpf/user_unwind.bpf.h,
// bpf/kernel_unwind.bpf.h).
std::string reuse_summary(const std::array<uint64_t, UW_STAT_NR> &w) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  return "stack reuse: user " + n(w[UW_STAT_REUSED]) + " reused, " +
         n(w[UW_STAT_REUSE_CHANGED]) + " walked again (a word changed), " +
         n(w[UW_STAT_REUSE_PROBE_READ]) +
         " checks by probe read (the rest through the page tables), " +
         n(w[UW_STAT_DEFERRED]) + " left for the switch-in (" +
         n(w[UW_STAT_DEFER_TAKEN]) +
         " taken there: the rest were shorter "
         "than -m), " +
         n(w[UW_STAT_MEMO_RECHECKED]) + " walked again after " +
         std::to_string(UW_MEMO_RECHECK) +
         " reuses (twice as many after each that agreed), " +
         n(w[UW_STAT_MEMO_REFUSED]) +
         " whole walks not kept (they did not reach an end of the stack), " +
         n(w[UW_STAT_REUSE_MISMATCH]) + " disagreed; kernel " +
         n(w[UW_STAT_KREUSED]) + " reused, " + n(w[UW_STAT_KREUSE_CHANGED]) +
         " walked again, " + n(w[UW_STAT_KREUSE_MISMATCH]) +
         " disagreed (with --verify-stack-reuse, a fresh walk checks each)";
}

// User stacks of the threads' memos by why they were walked, for waits
// begun voluntarily and for preemptions (UW_STAT_CAUSE*); with
// --time-walks, the BPF ns each took on average.
std::string walk_causes_summary(const std::array<uint64_t, UW_STAT_NR> &w,
                                bool timed) {
  static const char *const names[UW_CAUSE_NR] = {
      "reused",         "first (no memo)",
      "new registers",  "tables or maps moved",
      "a word changed", "due for a recheck"};
  auto part = [&](const char *what, int count_at, int ns_at) {
    std::string s = what;
    for (int c = 0; c < UW_CAUSE_NR; c++) {
      const uint64_t n = w[count_at + c];
      s += (c ? ", " : " ") + std::to_string(n) + " " + names[c];
      if (timed && n)
        s += " (" + std::to_string(w[ns_at + c] / n) + " ns)";
    }
    return s;
  };
  return part("user stacks by cause, voluntary waits:", UW_STAT_CAUSE,
              UW_STAT_CAUSE_NS) +
         part("; preempted:", UW_STAT_CAUSE_PREEMPTED,
              UW_STAT_CAUSE_PREEMPTED_NS);
}

// Off-CPU time on stacks that are not whole, or lost, from what was
// collected and the counters of the programs and the walker.
IncompleteStacks incomplete_stacks(const RawProfile &raw,
                                   const std::array<uint64_t, UW_STAT_NR> &w,
                                   const ProfileOptions &opts) {
  IncompleteStacks s;
  s.stack_storage_size = opts.stack_storage_size;
  s.max_entries = opts.max_entries;
  const auto &lost = raw.lost;
  const auto &lost_ns = raw.lost_ns;
  uint64_t both_ns = 0, both_waits = 0; // neither stack
  for (const auto &[key, value] : raw.counts) {
    s.total_ns += value.total_ns;
    // Counted with the storage's loss (lost_ns, from the same keys).
    if (key.user_stack == OFFCPU_STACK_FULL ||
        key.kernel_stack == OFFCPU_STACK_FULL)
      continue;
    const bool no_user = key.user_stack == OFFCPU_STACK_MISSED;
    const bool no_kernel = key.kernel_stack == OFFCPU_STACK_MISSED;
    if (no_user && no_kernel) {
      both_ns += value.total_ns;
      both_waits += value.count;
    } else if (no_user) {
      s.no_user_ns += value.total_ns;
      s.no_user_waits += value.count;
    } else if (no_kernel) {
      s.no_kernel_ns += value.total_ns;
      s.no_kernel_waits += value.count;
    }
  }
  s.full_stacks = lost[OFFCPU_LOST_STACK_MAP_FULL];
  s.full_ns = lost_ns[OFFCPU_LOST_STACK_MAP_FULL];
  // The overflow buckets have neither stack: what is left of those is the
  // walks' own.
  s.lost_waits = lost[OFFCPU_LOST_OVERFLOW_FULL];
  s.lost_ns = lost_ns[OFFCPU_LOST_OVERFLOW_FULL];
  s.overflow_waits = lost[OFFCPU_LOST_AGG_MAP_FULL] -
                     std::min(lost[OFFCPU_LOST_AGG_MAP_FULL], s.lost_waits);
  s.overflow_ns = lost_ns[OFFCPU_LOST_AGG_MAP_FULL] -
                  std::min(lost_ns[OFFCPU_LOST_AGG_MAP_FULL], s.lost_ns);
  both_ns -= std::min(both_ns, s.overflow_ns);
  both_waits -= std::min(both_waits, s.overflow_waits);
  s.no_user_ns += both_ns;
  s.no_user_waits += both_waits;
  s.no_kernel_ns += both_ns;
  s.no_kernel_waits += both_waits;
  s.no_stack_ns = s.no_user_ns + s.no_kernel_ns - both_ns;
  s.held_waits = lost[OFFCPU_LOST_HELD];
  s.held_ns = lost_ns[OFFCPU_LOST_HELD];
  s.total_ns += s.lost_ns + s.held_ns; // not in the profile
  s.partial_waits = w[UW_STAT_PARTIAL_ENDED];
  s.partial_ns = std::min(w[UW_STAT_PARTIAL_NS], s.total_ns);
  if (raw.missed_switches)
    s.events.push_back(std::to_string(raw.missed_switches) +
                       " context switches the kernel did not run the hook "
                       "for (waits may be missing)");
  if (uint64_t n = lost[OFFCPU_LOST_START_STORE])
    s.events.push_back(std::to_string(n) +
                       " waits lost: the kernel had no memory for their "
                       "start time");
  if (uint64_t n = lost[OFFCPU_LOST_ANNOUNCE])
    s.events.push_back(std::to_string(n) +
                       " new stacks announced late (a process gone by then "
                       "may show [unknown])");
  // Switch-ins the kernel did not report lose nothing but, with stacks
  // taken at switch-in, the kernel stack: counted above as such.
  return s;
}

// What the report says of the drained counts, taken before naming
// consumes them (add_offcpu_samples).
struct CountsReport {
  std::string losses; // the first lines of the losses, in their order
  size_t keys = 0;
  bool name_unmatched = false;
};

// The losses the counts and the stacks tell: the summary line first (the
// causes it covers have their lines with -v), then the limits hit.
CountsReport report_counts(const RawProfile &raw, const OffcpuSession &session,
                           const ProfileOptions &opts,
                           const Unwinder &unwinder) {
  CountsReport r;
  r.keys = raw.counts.size();
  r.name_unmatched = name_unmatched(opts, raw);
  LossTime time;
  time.ns = raw.lost_ns;
  time.stack_reserve = opts.stack_reserve;
  for (const auto &kv : raw.counts)
    time.total_ns += kv.second.total_ns;
  // Not in the profile: lost with their waits.
  time.total_ns +=
      raw.lost_ns[OFFCPU_LOST_OVERFLOW_FULL] + raw.lost_ns[OFFCPU_LOST_HELD];
  const auto walker = session.unwind_counters();
  std::string &losses = r.losses;
  losses = incomplete_summary(incomplete_stacks(raw, walker, opts));
  losses += describe_losses(raw.lost, opts.stack_storage_size, opts.max_entries,
                            &time, opts.verbose ? 0 : kSummarizedLosses);
  const TruncatedStacks cut = truncated_stacks(raw.counts, raw.stacks);
  losses += describe_truncated(cut.stacks, cut.waits, opts.max_stack_depth);
  if (session.plan().user_unwind_tables)
    losses += unwinder.describe_losses(walker) +
              unwinder.describe_mapping_losses(raw.counts, raw.stacks);
  if (uint64_t bad =
          walker[UW_STAT_REUSE_MISMATCH] + walker[UW_STAT_KREUSE_MISMATCH])
    losses += "offcpu: warning: " + std::to_string(bad) +
              " reused stacks disagreed with a fresh walk (a bug: please "
              "report it; --no-stack-reuse avoids it)\n";
  return r;
}

void report_details(const RawProfile &raw, size_t keys,
                    const Symbolizer &symbolizer, const OffcpuSession &session,
                    const ProfileOptions &opts, const Unwinder &unwinder,
                    const CostReport &cost);

// Everything lost, by cause. By default one summary line for what the
// window could not record whole (the share of off-CPU time, with the
// option that helps), and one line per other limit that was hit; with -v
// each cause on its line, and how the run went.
void report(const CountsReport &counts, const RawProfile &raw,
            const Symbolizer &symbolizer, const OffcpuSession &session,
            const ProfileOptions &opts, const Unwinder &unwinder,
            const CostReport &cost) {
  std::string losses = counts.losses;
  losses += symbolizer.describe_losses(opts.verbose);
  losses += describe_python(session.python_counters(),
                            symbolizer.python().stats(), opts.verbose);
  fputs(losses.c_str(), stderr);
  if (opts.verbose)
    report_details(raw, counts.keys, symbolizer, session, opts, unwinder, cost);
}

// -v: the causes behind the summary line that are not the programs'
// losses, the cost, and how the run went. `keys`: the counts drained.
void report_details(const RawProfile &raw, size_t keys,
                    const Symbolizer &symbolizer, const OffcpuSession &session,
                    const ProfileOptions &opts, const Unwinder &unwinder,
                    const CostReport &cost) {
  const auto walker = session.unwind_counters();
  const bool orc = session.plan().kstack_at_switch_in;
  std::string details;
  if (uint64_t n = walker[UW_STAT_PARTIAL_ENDED])
    details += "offcpu: warning: " + std::to_string(n) +
               " waits ended before their process's unwind tables were "
               "ready (" +
               std::to_string(walker[UW_STAT_PARTIAL_NS] / 1000000) +
               " ms of off-CPU time): their user stacks were walked with "
               "frame pointers only, or cut at a library whose table was "
               "being built, and may be short\n";
  if (raw.missed_switches)
    details += "offcpu: warning: " + std::to_string(raw.missed_switches) +
               " context switches were not seen (the kernel skipped the "
               "hook: its recursion guard); waits may be missing\n";
  if (raw.unseen_switch_ins && orc)
    details += "offcpu: warning: " + std::to_string(raw.unseen_switch_ins) +
               " waits ended by switch-ins the kernel did not report "
               "(sched_switch skipped them): their time is recovered from "
               "the scheduler's accounting, their kernel stacks are lost "
               "([Missed Kernel Stack])\n";
  if (uint64_t lost = walker[UW_STAT_DEFER_LOST])
    details += "offcpu: warning: " + std::to_string(lost) +
               " user stacks left for a switch-in the kernel did not report "
               "were lost ([Missed User Stack])\n";
  fputs(details.c_str(), stderr);
  note(cost.summary());
  fputs(cost.per_program().c_str(), stderr);
  if (raw.starts_spilled)
    note(std::to_string(raw.starts_spilled) +
         " waits began when the kernel could not give their thread task "
         "storage: kept in the hash map instead (none lost for it)");
  if (raw.unseen_switch_ins && !orc)
    note(std::to_string(raw.unseen_switch_ins) +
         " switch-ins the kernel did not report: their waits were ended "
         "from its scheduler accounting (sched_info)");
  note("window: " + std::to_string(session.window_start_ns()) + " to " +
       std::to_string(session.window_start_ns() + raw.window_ns) +
       " ns (CLOCK_MONOTONIC)");
  note("collected " + std::to_string(keys) + " thread/stack pairs, " +
       std::to_string(raw.stacks.size()) + " stacks over " +
       std::to_string(raw.window_ns / 1000000) + " ms");
  note(symbolization_summary(symbolizer.stats()));
  if (session.plan().user_unwind_tables) {
    for (const std::string &line : unwinder.describe(walker))
      note(line);
    if (unwinder.ready_ns() > session.window_start_ns())
      note("unwind tables of the processes asked for at start ready " +
           ms_between(session.window_start_ns(), unwinder.ready_ns()) +
           " ms after the attach");
  }
  note(reuse_summary(walker));
  if (opts.time_walks)
    note(walk_causes_summary(walker, true));
  if (orc) {
    const auto &k = raw.kunwind;
    note("kernel unwind: " + std::to_string(k[OFFCPU_KUNWIND_SPLICED]) +
         " stacks finished by the kernel's walk, " +
         std::to_string(k[OFFCPU_KUNWIND_ORC_LOOKUPS]) +
         " ORC table searches, " + std::to_string(k[OFFCPU_KUNWIND_MISMATCH]) +
         " mismatches, " + std::to_string(walker[UW_STAT_KWALKS]) +
         " walks by the hooks that keep memos, " +
         std::to_string(walker[UW_STAT_KMEMO_UNKEPT]) +
         " of them not kept as one (more words than a memo holds)" +
         (opts.verify_kernel_unwind
              ? ", " + std::to_string(k[OFFCPU_KUNWIND_VERIFIED]) +
                    " verified against the kernel's walk"
              : std::string()));
    if (opts.wakers)
      note("waker kernel stacks: " + std::to_string(k[OFFCPU_KUNWIND_LIVE]) +
           " by the ORC walk from the tracepoint (or reused), " +
           std::to_string(k[OFFCPU_KUNWIND_LIVE_KERNEL]) +
           " by the kernel's walk (interrupts, module code)");
  }
}

// The maps' sizes (those not given: from what the machine holds) and the
// stop pass's share of them, checked against the machine's limits.
void size_maps(ProfileOptions &opts) {
  constexpr uint64_t kCountsItem = sizeof(offcpu_key) + sizeof(offcpu_value);
  if (!opts.stack_storage_size)
    opts.stack_storage_size = default_stack_storage(system_files());
  if (!opts.max_entries)
    opts.max_entries = default_max_entries(kCountsItem, system_files());
  prepare_tracing(opts.verbose,
                  {opts.stack_storage_size, opts.max_entries, kCountsItem});
  opts.stack_reserve =
      stop_pass_reserve(opts.stack_storage_size, system_files());
  opts.counts_reserve = stop_pass_reserve(opts.max_entries, system_files());
  if (opts.verbose)
    note("maps: " + std::to_string(opts.stack_storage_size) + " stacks, " +
         std::to_string(opts.max_entries) + " aggregation keys (" +
         std::to_string(opts.stack_reserve) + " and " +
         std::to_string(opts.counts_reserve) + " kept for the stop pass)");
}

// The traced command, let run: the tables of the files it maps first,
// before it runs: its first waits are then walked again through them while
// they last, and its install needs no table built. After the attach, off
// the start-up's path: nothing of the command runs before its release.
// Returns what tells that it ended.
OffcpuSession::Finished release_command(TracedCommand &command,
                                        OffcpuSession &session,
                                        Unwinder &unwinder,
                                        const ProfileOptions &opts) {
  if (session.plan().user_unwind_tables) {
    const uint64_t t0 = monotonic_ns();
    unwinder.work_ahead(kTablesBeforeWindowNs, command_files(command.path()));
    if (opts.verbose)
      note("unwind tables of the command's files built in " +
           ms_between(t0, monotonic_ns()) + " ms before its release");
  }
  // In the filter only now: its wait for this release is offcpu's, not the
  // command's; from exec on, it and its children are traced.
  session.add_process(static_cast<uint32_t>(command.pid()));
  command.release();
  return [&command] { return command.exited(); };
}

// When each step after the window ended (CLOCK_MONOTONIC).
struct EndTimes {
  uint64_t collected = 0, stopped = 0, settled = 0, drained = 0, named = 0;
};

// -v: what the end took; after a signal, the whole of it is the user's
// wait. `closed`: when the window closed.
void note_end_times(const EndTimes &t, uint64_t closed) {
  note(
      "after the window: " + ms_between(closed, std::max(closed, t.collected)) +
      " ms to leave the loop, stop " + ms_between(t.collected, t.stopped) +
      " ms, DWARF lookups " + ms_between(t.stopped, t.settled) + " ms, drain " +
      ms_between(t.settled, t.drained) + " ms, naming " +
      ms_between(t.drained, t.named) + " ms, output " +
      ms_between(t.named, monotonic_ns()) + " ms");
}

// When the time given to naming starts: the window's end, or when the stop
// could begin, if it waited for the edges' iterators (a short window).
uint64_t naming_from(const OffcpuSession &session, uint64_t collected) {
  return std::max(window_closed_ns(session.planned_stop_ns(), collected),
                  session.edges_ready_ns());
}

} // namespace

int run_profile(const ProfileOptions &given) {
  check_pids_are_processes(given.pids);
  ProfileOptions opts = given;
  size_maps(opts);
  for (const std::string &path : opts.cgroup_paths)
    opts.cgroup_ids.push_back(cgroup_id(path));
  opts.output.histograms = opts.verbose; // -v: the text report's histograms
  Outputs outputs(opts.output);          // before tracing: a bad -o fails first
  std::unique_ptr<TracedCommand> command;
  if (!opts.command.empty()) {
    command = std::make_unique<TracedCommand>(
        opts.command,
        CommandSetup{command_user(opts.user, opts.group), opts.keep_fds});
  }
  Unwinder unwinder(system_files(), opts.output.debug_dirs,
                    uint64_t{opts.unwind_memory_mib} << 20);
  unwinder.limit_memory(
      map_budget_room({opts.stack_storage_size, opts.max_entries,
                       sizeof(offcpu_key) + sizeof(offcpu_value)},
                      system_files()),
      kMapBudgetName);
  SelfCost cost; // the kernel's run-time statistics, on while offcpu runs
  // From the load on: on a saturated host the verifier at nice 0 took
  // seconds. The command, forked above, keeps its own priority.
  auto boost = std::make_unique<PriorityBoost>(kTracingNice);
  auto startup = std::make_unique<PriorityBoost>(kBurstNice);
  auto session = start_session(opts, unwinder);
  if (!session) {
    note("interrupted before tracing started; nothing collected");
    return kExitInterrupted;
  }
  // From here a signal closes the window in the kernel the moment it comes.
  WindowEndOnSignal window_end(session->window_end_word());
  cost.watch(session->hook_programs());
  cost.start();
  start_tracing(*session, opts, startup);
  const int64_t wall_start = wall_clock_ns();
  Symbolizer symbolizer(system_files(), KernelSymbols{});
  symbolizer.add_debug_dirs(opts.output.debug_dirs);
  symbolizer.set_symbolize_user(opts.output.symbolize);
  symbolizer.set_source_options(source_options(opts.output));
  symbolizer.enable_debuginfod(
      static_cast<uint64_t>(opts.output.debuginfod_s * 1e9));
  symbolizer.stop_window_at(session->planned_stop_ns());
  OffcpuSession::Finished finished;
  if (command)
    finished = release_command(*command, *session, unwinder, opts);
  collect(*session, opts, symbolizer, unwinder, cost, finished);
  // The rest is a burst of work the user waits for (see kBurstNice).
  PriorityBoost finishing(kBurstNice);
  EndTimes t;
  t.collected = monotonic_ns();
  session->stop();
  t.stopped = monotonic_ns();
  const uint64_t name_ns = static_cast<uint64_t>(opts.name_time_s * 1e9);
  symbolizer.set_deadline(naming_from(*session, t.collected) + name_ns,
                          name_ns);
  // The announcements still unread (batched, or made by the stop pass):
  // their stacks' addresses are known before the DWARF settles, which
  // otherwise reopens files for them while naming.
  session->read_announced(stack_noter(*session, symbolizer));
  symbolizer.settle_dwarf(); // before the drained counts take their memory
  t.settled = monotonic_ns();
  RawProfile raw = session->drain();
  const RawTimeline events = session->take_events(raw);
  t.drained = monotonic_ns();
  const CountsReport counts = report_counts(raw, *session, opts, unwinder);
  Profile profile = build_profile(raw, events, symbolizer, opts, wall_start);
  if (opts.events)
    profile.timeline = std::make_shared<const Timeline>(build_timeline(
        events, raw, symbolizer, timeline_setup(opts, *session, raw)));
  symbolizer.end_naming();
  t.named = monotonic_ns();
  if (outputs.write_all(profile) && profile.timeline && opts.top_waits)
    write_top_waits(*profile.timeline, opts.top_waits);
  if (profile.timeline && profile.timeline->lost_store)
    warn(std::to_string(profile.timeline->lost_store) +
         " timeline events dropped (" +
         std::to_string(profile.timeline->lost_store_ns / 1000000) +
         " ms of waits): offcpu held --events-memory " +
         std::to_string(opts.events_memory_mib) +
         " MiB of them; the other outputs still count their waits; raise "
         "--events-memory or --events-min");
  report(counts, raw, symbolizer, *session, opts, unwinder,
         cost.report(raw.window_ns));
  if (opts.verbose)
    note_end_times(t, session->window_start_ns() + raw.window_ns);
  if (counts.name_unmatched)
    report_unmatched_name(opts);
  return command ? finish_command(*command) : kExitOk;
}

} // namespace offcpu
