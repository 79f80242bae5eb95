#include "run/profile.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "collect/offcpu_session.h"
#include "probe/features.h"
#include "run/outputs.h"
#include "run/preamble.h"
#include "run/report.h"
#include "symbolize/kernel_namer.h"
#include "symbolize/name_samples.h"
#include "symbolize/symbolizer.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/messages.h"
#include "util/priority.h"
#include "util/signals.h"

namespace offcpu {
namespace {

std::string target_description(const ProfileOptions &o) {
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
  if (s.empty())
    s = "all threads";
  if (o.user_threads_only)
    s += " (user threads only)";
  if (o.kernel_threads_only)
    s += " (kernel threads only)";
  return s;
}

std::string ms_between(uint64_t a, uint64_t b) {
  return std::to_string((b - a) / 1000000);
}

// Probes the kernel, loads the programs along the plans and attaches them:
// the window opens then.
std::unique_ptr<OffcpuSession> start_session(const ProfileOptions &opts) {
  const uint64_t t_start = monotonic_ns();
  KernelFeatures features = probe_kernel_features();
  const uint64_t t_probed = monotonic_ns();
  require_btf(features.btf);
  if (opts.verbose)
    note("kernel: " + describe_features(features));
  auto session = OffcpuSession::load(
      opts, offcpu_plans(features, opts.attach, opts.kernel_unwind),
      opts.verbose);
  if (stop_requested())
    return nullptr;
  const uint64_t t_loaded = monotonic_ns();
  session->attach(opts.duration_s ? *opts.duration_s : -1.0);
  if (opts.verbose) {
    const uint64_t opened = session->window_start_ns();
    note("attached after " + ms_between(t_start, opened) + " ms: probe " +
         ms_between(t_start, t_probed) + ", load " +
         ms_between(t_probed, t_loaded) + ", attach " +
         ms_between(t_loaded, opened) +
         "; window opened then; waits already in progress seeded in " +
         ms_between(opened, monotonic_ns()) + " ms");
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

void show_progress(const OffcpuSession &session, double total) {
  double elapsed =
      static_cast<double>(monotonic_ns() - session.window_start_ns()) / 1e9;
  OffcpuSession::Progress p = session.progress();
  char line[160];
  if (total < 0)
    snprintf(line, sizeof(line),
             "\roffcpu: %.0f s, %llu waits, %llu stacks\033[K", elapsed,
             static_cast<unsigned long long>(p.waits),
             static_cast<unsigned long long>(p.keys));
  else
    snprintf(line, sizeof(line),
             "\roffcpu: %.0f/%.0f s, %llu waits, %llu stacks\033[K", elapsed,
             total, static_cast<unsigned long long>(p.waits),
             static_cast<unsigned long long>(p.keys));
  fputs(line, stderr);
}

// Waits out the window; on a terminal, one line updated in place.
// Processes announced by the kernel get their maps read and files opened
// now, while they exist; files are parsed between polls.
void collect(OffcpuSession &session, const ProfileOptions &opts,
             Symbolizer &symbolizer) {
  auto remember = [&](uint32_t tgid, uint64_t stack, uint32_t parent) {
    symbolizer.note_user_stack(tgid, stack, session.read_stack(stack), parent);
  };
  auto parse = [&](uint64_t deadline) {
    return symbolizer.parse_pending(deadline);
  };
  const double total = opts.duration_s ? *opts.duration_s : -1.0;
  const uint64_t deadline = session.planned_stop_ns(); // 0: until Ctrl-C
  bool progress =
      !opts.output.quiet && isatty(STDERR_FILENO) && (total < 0 || total >= 2);
  if (!progress) {
    session.wait(deadline, remember, parse);
    return;
  }
  for (;;) {
    uint64_t now = monotonic_ns();
    uint64_t step_end = now + 1000000000;
    if (deadline && step_end > deadline)
      step_end = deadline;
    if ((deadline && now >= deadline) ||
        session.wait(step_end, remember, parse))
      break;
    show_progress(session, total);
  }
  fputs("\r\033[K", stderr);
}

// Names every frame of what the session collected.
Profile build_profile(const RawProfile &raw, Symbolizer &symbolizer,
                      const ProfileOptions &opts, int64_t wall_start) {
  std::string fallback;
  symbolizer.set_kernel_symbols(kernel_symbols_for(
      kernel_addresses(raw.counts, raw.stacks), {}, system_files(), &fallback));
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
  add_offcpu_samples(p, raw, symbolizer,
                     {!opts.kernel_stacks_only, !opts.user_stacks_only});
  return p;
}

// Everything lost, by cause; with -v, how the run went.
void report(const RawProfile &raw, const Symbolizer &symbolizer,
            const OffcpuSession &session, const ProfileOptions &opts) {
  std::string losses =
      describe_losses(raw.lost, opts.stack_storage_size, opts.max_entries);
  if (raw.missed_switches)
    losses += "offcpu: warning: " + std::to_string(raw.missed_switches) +
              " context switches were not seen (the kernel skipped the "
              "hook: its recursion guard); waits may be missing\n";
  const bool orc = session.plan().kstack_at_switch_in;
  if (raw.unseen_switch_ins && orc)
    losses += "offcpu: warning: " + std::to_string(raw.unseen_switch_ins) +
              " waits ended by switch-ins the kernel did not report "
              "(sched_switch skipped them): their time is recovered from the "
              "scheduler's accounting, their kernel stacks are lost ([Missed "
              "Kernel Stack])\n";
  losses += symbolizer.describe_losses();
  fputs(losses.c_str(), stderr);
  if (!opts.verbose)
    return;
  if (raw.unseen_switch_ins && !orc)
    note(std::to_string(raw.unseen_switch_ins) +
         " switch-ins the kernel did not report: their waits were ended "
         "from its scheduler accounting (sched_info)");
  note("window: " + std::to_string(session.window_start_ns()) + " to " +
       std::to_string(session.window_start_ns() + raw.window_ns) +
       " ns (CLOCK_MONOTONIC)");
  note("collected " + std::to_string(raw.counts.size()) +
       " thread/stack pairs, " + std::to_string(raw.stacks.size()) +
       " stacks over " + std::to_string(raw.window_ns / 1000000) + " ms");
  note(symbolization_summary(symbolizer.stats()));
  if (orc) {
    const auto &k = raw.kunwind;
    note("kernel unwind: " + std::to_string(k[OFFCPU_KUNWIND_SPLICED]) +
         " stacks finished by the kernel's walk, " +
         std::to_string(k[OFFCPU_KUNWIND_ORC_LOOKUPS]) +
         " ORC table searches, " + std::to_string(k[OFFCPU_KUNWIND_MISMATCH]) +
         " mismatches" +
         (opts.verify_kernel_unwind
              ? ", " + std::to_string(k[OFFCPU_KUNWIND_VERIFIED]) +
                    " verified against the kernel's walk"
              : std::string()));
  }
}

} // namespace

int run_profile(const ProfileOptions &opts) {
  prepare_tracing(opts.verbose, {opts.stack_storage_size, opts.max_entries,
                                 sizeof(offcpu_key) + sizeof(offcpu_value)});
  Outputs outputs(opts.output); // before tracing: a bad -o fails first
  auto session = start_session(opts);
  if (!session) {
    note("interrupted before tracing started; nothing collected");
    return kExitInterrupted;
  }
  announce_tracing(opts);
  const int64_t wall_start = wall_clock_ns();
  Symbolizer symbolizer(system_files(), KernelSymbols{});
  symbolizer.add_debug_dirs(opts.output.debug_dirs);
  symbolizer.set_symbolize_user(opts.output.symbolize);
  {
    PriorityBoost boost(kTracingNice);
    collect(*session, opts, symbolizer);
    session->stop();
  }
  RawProfile raw = session->drain();
  Profile profile = build_profile(raw, symbolizer, opts, wall_start);
  outputs.write_all(profile);
  report(raw, symbolizer, *session, opts);
  return kExitOk;
}

} // namespace offcpu
