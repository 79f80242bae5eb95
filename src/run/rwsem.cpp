#include "run/rwsem.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_set>

#include "collect/cgroups.h"
#include "collect/rwsem_session.h"
#include "collect/self_cost.h"
#include "model/lock_kinds.h"
#include "output/lock_table.h"
#include "output/render.h"
#include "probe/features.h"
#include "run/command.h"
#include "run/outputs.h"
#include "run/preamble.h"
#include "run/report.h"
#include "symbolize/kernel_namer.h"
#include "symbolize/name_samples.h"
#include "unwind/unwinder.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/messages.h"
#include "util/priority.h"
#include "util/signals.h"

namespace offcpu {
namespace {

struct DirCloser {
  void operator()(DIR *d) const { closedir(d); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

bool all_digits(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return false;
  return true;
}

std::string read_comm(const std::string &path) {
  auto text = system_files().read(path, 64);
  if (!text)
    return {};
  std::string c = *text;
  if (!c.empty() && c.back() == '\n')
    c.pop_back();
  return c;
}

bool any_thread_named(const std::string &dir, const std::string &name) {
  Dir tasks(opendir((dir + "/task").c_str()));
  if (!tasks)
    return false;
  while (dirent *t = readdir(tasks.get()))
    if (all_digits(t->d_name) &&
        read_comm(dir + "/task/" + t->d_name + "/comm") == name)
      return true;
  return false;
}

std::string clock_time() {
  time_t now = time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  char buf[16];
  strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

// SVG and pprof describe the whole run: they are written once, at the end;
// text and folded reports come every interval.
bool whole_run_format(OutputFormat f) {
  return f == OutputFormat::Svg || f == OutputFormat::Pprof;
}

bool any_target(Outputs &outputs, bool whole_run) {
  for (size_t i = 0; i < outputs.size(); i++)
    if (whole_run_format(outputs.format(i)) == whole_run)
      return true;
  return false;
}

std::string id_list(const std::vector<uint32_t> &ids) {
  std::string list;
  for (uint32_t p : ids)
    list += (list.empty() ? "" : ",") + std::to_string(p);
  return list;
}

// "processes named 'x' in PID 1,2", for messages and pprof's comment.
std::string describe_target(const RwsemOptions &opts) {
  if (!opts.command.empty())
    return opts.command[0] + " and its children";
  std::string who;
  if (!opts.name.empty())
    who = (opts.match_thread_name ? "threads named '" : "processes named '") +
          opts.name + "'";
  if (!opts.pids.empty())
    who += (who.empty() ? "PID " : " in PID ") + id_list(opts.pids) +
           (opts.follow_children ? " and their children" : "");
  if (!opts.tids.empty())
    who += (who.empty() ? "TID " : " in TID ") + id_list(opts.tids);
  for (const std::string &c : opts.cgroup_paths)
    who += (who.empty() ? "all threads in cgroup " : " in cgroup ") + c;
  if (who.empty())
    who = opts.kernel_threads_only ? "all kernel threads"
          : opts.user_threads_only ? "all user threads"
                                   : "all threads";
  return who;
}

// "lock" (offcpu lock) or "rwsem" (its preset), for headings.
const char *what_waits(const RwsemOptions &opts) {
  return opts.lock_command ? "lock" : "rwsem";
}

// offcpu lock: the kinds traced, "mutex, rwsem:read, ...".
std::string kinds_traced(uint32_t kinds) {
  if (kinds == OFFCPU_LOCK_SLEEPING)
    return "every sleeping kind";
  if (kinds == (OFFCPU_LOCK_SLEEPING | OFFCPU_LOCK_SPINNING))
    return "every kind, spinning too";
  if (kinds == (OFFCPU_LOCK_SLEEPING | OFFCPU_LOCK_FUTEXES))
    return "every sleeping kind and futexes";
  std::string out;
  for (uint32_t k = 0; k < OFFCPU_LOCK_KINDS; k++)
    if (kinds & (1u << k))
      out += (out.empty() ? "" : ", ") + lock_kind_name(k);
  return out;
}

void announce_tracing(const RwsemOptions &opts, const std::string &who) {
  if (!opts.name.empty() &&
      !process_name_exists(opts.name, opts.match_thread_name))
    note(std::string("no ") + (opts.match_thread_name ? "thread" : "process") +
         " named '" + opts.name + "' yet; tracing it when it starts");
  std::string what =
      opts.lock_command ? "Tracing lock waits (" +
                              kinds_traced(opts.lock_kinds) + ") of " + who
                        : std::string("Tracing rwsem ") +
                              (opts.include_read ? "read and write" : "write") +
                              " waits of " + who;
  if (opts.duration_s) {
    char secs[32];
    snprintf(secs, sizeof(secs), "%g", *opts.duration_s);
    what += std::string(" for ") + secs + " s... Hit Ctrl-C to end early.";
  } else {
    what += "... Hit Ctrl-C to end.";
  }
  note(what);
}

// Names one interval's kernel frames and locks (see kernel_namer.h). Where
// the kernel cannot, all of /proc/kallsyms is read once and kept.
void name_kernel(const RawLockWaits &raw, Symbolizer &sym, bool &on_kallsyms,
                 bool verbose) {
  if (on_kallsyms)
    return;
  std::vector<uint64_t> locks;
  for (const auto &kv : raw.waits)
    if (!(kv.first.flags & RWSEM_LOCK_IS_MMAP) &&
        kv.first.kind != OFFCPU_LOCK_FUTEX &&
        kv.first.kind != OFFCPU_LOCK_FUTEX_PI) // user space: futex words
      locks.push_back(kv.first.lock);
  std::vector<uint64_t> addrs = kernel_addresses(raw.waits, raw.stacks);
  for (const auto &[id, waker] : raw.wakers) // --wakers: theirs too
    if (auto it = raw.stacks.find(waker.kernel_stack); it != raw.stacks.end())
      addrs.insert(addrs.end(), it->second.begin(), it->second.end());
  std::string fallback;
  sym.set_kernel_symbols(
      kernel_symbols_for(addrs, locks, system_files(), &fallback));
  if (fallback.empty())
    return;
  on_kallsyms = true;
  if (verbose)
    note("kernel frames named from /proc/kallsyms: " + fallback);
}

// The run: intervals of waiting, each drained and reported (text, folded
// targets) and kept for the end (SVG, pprof targets).
class RwsemRun {
public:
  // `ended`: tells that the traced command (-- COMMAND) has exited, which
  // ends the run; null without one.
  RwsemRun(const RwsemOptions &opts, RwsemSession &session, Outputs &outputs,
           Unwinder &unwinder, std::function<bool()> ended)
      : opts_(opts), session_(session), outputs_(outputs), unwinder_(unwinder),
        ended_(std::move(ended)), symbolizer_(system_files(), KernelSymbols{}),
        intervals_(any_target(outputs, false)),
        whole_(any_target(outputs, true)) {
    symbolizer_.add_debug_dirs(opts.output.debug_dirs);
    symbolizer_.set_symbolize_user(opts.output.symbolize);
    // --futex: futex words are named by the data objects holding them.
    symbolizer_.set_data_symbols((opts.lock_kinds & OFFCPU_LOCK_FUTEXES) != 0);
    symbolizer_.set_source_options(source_options(opts.output));
    symbolizer_.enable_debuginfod(
        static_cast<uint64_t>(opts.output.debuginfod_s * 1e9));
    whole_run_.kind = ProfileKind::LockWaits;
    whole_run_.user_symbolized = opts.output.symbolize;
  }

  // Returns false when stdout is gone (nobody is listening any more).
  bool run() {
    whole_run_.time_nanos = wall_clock_ns();
    const double start = seconds_now();
    double last = start;
    for (;;) {
      bool interrupted = wait_interval(start);
      double now = seconds_now();
      bool final =
          interrupted || stop_requested() || (ended_ && ended_()) ||
          (opts_.duration_s && now - start >= *opts_.duration_s - 1e-3);
      RawLockWaits raw = final ? session_.stop_and_drain() : session_.drain();
      name_cgroups(raw);
      lost_ = raw.lost;
      note_truncated(raw);
      name_kernel(raw, symbolizer_, on_kallsyms_, opts_.verbose);
      if (!report_interval(raw, now - last))
        return false;
      last = now;
      if (final)
        break;
    }
    whole_run_.duration_nanos =
        static_cast<int64_t>(session_.stopped_ns() - session_.attached_ns());
    whole_run_.comment = "offcpu " OFFCPU_VERSION ": " +
                         std::string(what_waits(opts_)) + " waits of " +
                         describe_target(opts_);
    for (size_t i = 0; i < outputs_.size(); i++)
      if (whole_run_format(outputs_.format(i)) &&
          outputs_.file(i).write(render(whole_run_, outputs_.format(i),
                                        render_options(opts_.output))) !=
              WriteResult::Ok)
        return false;
    return true;
  }

  const Symbolizer &symbolizer() const { return symbolizer_; }
  const std::array<uint64_t, OFFCPU_LOST_NR> &lost() const { return lost_; }
  // Over every interval: the stacks cut at the depth limit, their waits.
  size_t truncated_stacks() const { return cut_ids_.size(); }
  uint64_t truncated_waits() const { return cut_waits_; }

private:
  static double seconds_now() {
    return static_cast<double>(monotonic_ns()) / 1e9;
  }

  // --by cgroup: the waiters' cgroups by label ("nginx.service"), from one
  // bounded walk of the hierarchy.
  static void name_cgroups(RawLockWaits &raw) {
    std::vector<uint64_t> ids;
    for (const auto &kv : raw.waits)
      if (kv.first.cgroup)
        ids.push_back(kv.first.cgroup);
    if (ids.empty())
      return;
    for (auto &[id, path] : cgroup_paths(ids))
      raw.cgroups[id] = cgroup_label(path);
  }

  void note_truncated(const RawLockWaits &raw) {
    for (const auto &[key, val] : raw.waits) {
      bool cut = false;
      for (uint64_t id : {key.user_stack, key.kernel_stack})
        if (raw.stacks.truncated.count(id)) {
          cut_ids_.insert(id);
          cut = true;
        }
      if (cut)
        cut_waits_ += val.count;
    }
  }

  // Until the interval or the duration ends, or a stop; processes announced
  // meanwhile are captured (they may exit before the report).
  bool wait_interval(double start) {
    double now = seconds_now();
    double step = opts_.interval_s > 0 && intervals_ ? opts_.interval_s : -1;
    if (opts_.duration_s) {
      double left = start + *opts_.duration_s - now;
      step = step < 0 ? left : std::min(step, left);
    }
    if (step == 0)
      return false;
    auto remember = [&](uint32_t tgid, uint64_t stack, uint32_t parent) {
      symbolizer_.note_user_stack(tgid, stack, session_.read_stack(stack),
                                  parent);
    };
    // Unwind tables first: the next wait of a process walks with them.
    auto parse = [&](uint64_t deadline) {
      bool tables_done = unwinder_.work(deadline);
      return symbolizer_.parse_pending(deadline) && tables_done;
    };
    PriorityBoost boost(kTracingNice);
    const uint64_t end =
        step < 0 ? 0 : monotonic_ns() + static_cast<uint64_t>(step * 1e9);
    const bool stopped = wait_until(end, remember, parse);
    // Stacks announced without a wakeup in the interval's last poll: their
    // processes' maps are read before the interval is named.
    session_.read_announced(remember);
    return stopped;
  }

  // wait_interval()'s wait: true when stopped by a signal.
  bool wait_until(uint64_t end, const Announcements::NewStack &remember,
                  const Announcements::IdleWork &parse) {
    if (!ended_)
      return session_.wait(end, remember, parse);
    // A traced command: looked at every 100 ms, its exit ends the run.
    constexpr uint64_t kPollNs = 100000000;
    for (;;) {
      const uint64_t t = monotonic_ns();
      if (end && t >= end)
        return false;
      const uint64_t until = end ? std::min(end, t + kPollNs) : t + kPollNs;
      if (session_.wait(until, remember, parse))
        return true;
      if (ended_())
        return false;
    }
  }

  // One interval's report to every text and folded target, its samples
  // kept for the SVG and pprof ones. False when stdout is gone.
  bool report_interval(const RawLockWaits &raw, double seconds) {
    Profile interval;
    interval.kind = ProfileKind::LockWaits;
    interval.user_symbolized = opts_.output.symbolize;
    add_lock_waits(interval, raw, symbolizer_, StackSelection{},
                   opts_.lock_command);
    if (whole_)
      whole_run_.append(interval);
    for (size_t i = 0; i < outputs_.size(); i++) {
      const OutputFormat f = outputs_.format(i);
      if (whole_run_format(f))
        continue;
      std::string text;
      if (f == OutputFormat::Text) {
        char head[96];
        snprintf(head, sizeof(head), "[%s] %s waits over %.1f s%s\n",
                 clock_time().c_str(), what_waits(opts_), seconds,
                 interval.samples.empty() ? ": none" : "");
        text = head;
      }
      if (f == OutputFormat::Text && opts_.lock_command)
        text += render_lock_table(
            interval, opts_.by, opts_.verbose,
            LayoutOptions{opts_.output.delimited, opts_.output.thread});
      else
        text += render(interval, f, render_options(opts_.output));
      if (outputs_.file(i).write(text) != WriteResult::Ok)
        return false;
    }
    return true;
  }

  const RwsemOptions &opts_;
  RwsemSession &session_;
  Outputs &outputs_;
  Unwinder &unwinder_;
  std::function<bool()> ended_;
  Symbolizer symbolizer_;
  bool on_kallsyms_ = false;
  const bool intervals_, whole_; // targets of each kind
  Profile whole_run_;
  std::array<uint64_t, OFFCPU_LOST_NR> lost_{};
  std::unordered_set<uint64_t> cut_ids_;
  uint64_t cut_waits_ = 0;
};

// -v, after the report: the window's edges, what the programs cost, how
// the stacks were taken and named.
void note_run(const RwsemSession &session, const SelfCost &cost,
              const SymbolizeStats &st) {
  note("traced from " + std::to_string(session.attached_ns()) + " to " +
       std::to_string(session.stopped_ns()) + " ns (CLOCK_MONOTONIC)");
  const bool contentions = session.hooks_lead_with_contentions();
  const CostReport c =
      cost.report(session.stopped_ns() - session.attached_ns());
  note(c.summary(contentions ? "lock contention" : "context switch",
                 contentions ? "contentions" : "switches"));
  fputs(c.per_program().c_str(), stderr);
  const auto [walked, reused] = session.kernel_stacks_at_begin();
  if (walked + reused)
    note("kernel stacks at waits' begins: " + std::to_string(walked) +
         " walked, " + std::to_string(reused) +
         " the same as the thread's last (reused)");
  note("symbolization: " + std::to_string(st.named) + " frames named, " +
       std::to_string(st.unnamed) + " unnamed");
}

} // namespace

bool process_name_exists(const std::string &name, bool threads) {
  Dir proc(opendir("/proc"));
  if (!proc)
    return false;
  while (dirent *e = readdir(proc.get())) {
    if (!all_digits(e->d_name))
      continue;
    std::string dir = std::string("/proc/") + e->d_name;
    if (threads ? any_thread_named(dir, name)
                : read_comm(dir + "/comm") == name)
      return true;
  }
  return false;
}

int run_rwsem(const RwsemOptions &given) {
  RwsemOptions opts = given;
  if (opts.lock_command && opts.output.title.empty())
    opts.output.title = "Lock Wait Flame Graph";
  prepare_tracing(opts.verbose, {opts.stack_storage_size, opts.max_entries,
                                 sizeof(rwsem_key) + sizeof(rwsem_value)});
  // -- COMMAND: forked now, held until the programs are attached.
  std::unique_ptr<TracedCommand> command;
  if (!opts.command.empty())
    command = std::make_unique<TracedCommand>(
        opts.command,
        CommandSetup{command_user(opts.user, opts.group), opts.keep_fds});
  RwsemFeatures features = probe_rwsem_features();
  require_btf(features.btf);
  OutputOptions output = opts.output;
  output.histograms = opts.verbose; // -v: the text report's histograms
  Outputs outputs(output);
  // User unwind tables, sized for the named PIDs (else the whole system:
  // processes are matched by name as they come).
  Unwinder unwinder(system_files(), opts.output.debug_dirs, uint64_t{64} << 20);
  unwinder.limit_memory(uint64_t{64} << 20, "rwsem's fixed 64 MiB");
  unwinder.limit_memory(
      map_budget_room({opts.stack_storage_size, opts.max_entries,
                       sizeof(rwsem_key) + sizeof(rwsem_value)},
                      system_files()),
      kMapBudgetName);
  RwsemConfig config = opts;
  for (const std::string &path : opts.cgroup_paths)
    config.cgroup_ids.push_back(cgroup_id(path));
  config.unwind_sizes = unwinder.plan(opts.pids);
  // Locks in slab objects by their cache's name (6.12+); else by address.
  config.slab_caches = opts.lock_command && features.slab_caches;
  auto session = RwsemSession::load(
      config, rwsem_plans(features, opts.attach, opts.lock_command),
      opts.verbose);
  if (opts.lock_command && session->plan().mechanism != RwsemAttach::Tracepoint)
    note(std::string("no lock:contention tracepoints (Linux 5.19+) in use: "
                     "only rwsem ") +
         (session->plan().mutex_target.empty() ? "" : "and mutex ") +
         "waits are seen (spinning and sleeping as one), through " +
         session->plan().describe());
  if (session->unwind_tables()) {
    unwinder.attach(session->unwind_maps(), config.unwind_sizes);
    session->on_unwind_request(
        [&unwinder](const uw_request &r) { unwinder.request(r.tgid, r.pc); });
    for (uint32_t pid : opts.pids)
      unwinder.request(pid);
  }
  if (stop_requested()) {
    note("interrupted before tracing started; nothing collected");
    return kExitInterrupted;
  }
  announce_tracing(opts, describe_target(opts));
  std::function<bool()> ended;
  if (command) {
    // In the filter only now: from its exec on, it and its children.
    session->add_process(static_cast<uint32_t>(command->pid()));
    command->release();
    ended = [&command] { return command->exited(); };
  }
  // -v: the kernel's run-time statistics of the programs. Only then: while
  // they are on, every BPF program's run on the machine is timed.
  std::optional<SelfCost> cost;
  if (opts.verbose) {
    cost.emplace();
    cost->watch(session->hook_programs());
    cost->start();
  }
  RwsemRun run(opts, *session, outputs, unwinder, ended);
  if (!run.run())
    return command ? finish_command(*command) : kExitOk; // stdout closed
  outputs.commit();
  fputs(
      (describe_losses(run.lost(), opts.stack_storage_size, opts.max_entries) +
       describe_truncated(run.truncated_stacks(), run.truncated_waits(),
                          opts.max_stack_depth) +
       (session->unwind_tables() ? unwinder.describe_losses({}) : "") +
       run.symbolizer().describe_losses())
          .c_str(),
      stderr);
  if (cost)
    note_run(*session, *cost, run.symbolizer().stats());
  return command ? finish_command(*command) : kExitOk;
}

} // namespace offcpu
