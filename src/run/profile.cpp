#include "run/profile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "collect/map_budget.h"
#include "collect/offcpu_session.h"
#include "collect/sample.h"
#include "output/folded.h"
#include "output/text.h"
#include "probe/features.h"
#include "run/emit.h"
#include "symbolize/kernel_namer.h"
#include "symbolize/symbolizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/output.h"
#include "util/output_file.h"
#include "util/priority.h"
#include "util/privileges.h"
#include "util/signals.h"

namespace offcpu {
namespace {

void note(const std::string &line) {
  fprintf(stderr, "offcpu: %s\n", line.c_str());
}

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

// Waits out the window; on a terminal, one line updated in place.
// Processes announced by the kernel get their maps and ELF files read now,
// while they exist.
void collect_with_progress(OffcpuSession &session, const ProfileOptions &opts,
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
  fputs("\r\033[K", stderr);
}

} // namespace

std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries) {
  std::string out;
  auto line = [&](uint64_t n, const std::string &text) {
    if (n)
      out += "offcpu: warning: " + std::to_string(n) + " " + text + "\n";
  };
  line(lost[OFFCPU_LOST_STACK_MAP_FULL],
       "stacks lost: stack storage full; raise --stack-storage-size (now " +
           std::to_string(stack_storage_size) + ")");
  line(lost[OFFCPU_LOST_STACK_COLLISION],
       "stacks lost to hash collisions; raise --stack-storage-size");
  line(lost[OFFCPU_LOST_AGG_MAP_FULL],
       "waits lost: too many distinct thread/stack pairs; raise --max-entries "
       "(now " +
           std::to_string(max_entries) + ")");
  line(lost[OFFCPU_LOST_START_STORE], "waits lost: the kernel could not store "
                                      "their start time (out of memory)");
  line(lost[OFFCPU_LOST_USER_STACK_WALK],
       "user stacks could not be walked (shown as [Missed User Stack])");
  line(lost[OFFCPU_LOST_KERNEL_STACK_WALK],
       "kernel stacks could not be walked (shown as [Missed Kernel Stack])");
  line(lost[OFFCPU_LOST_ANNOUNCE],
       "new stacks announced late (announcement ring full): a process that "
       "exited before blocking on the same stack again may show [unknown]");
  return out;
}

int run_profile(const ProfileOptions &opts) {
  install_stop_handlers();
  require_bpf_privileges();
  capture_libbpf_messages(opts.verbose);

  check_map_budget({opts.stack_storage_size, opts.max_entries,
                    sizeof(offcpu_key) + sizeof(offcpu_value)},
                   system_files());
  const uint64_t t_start = monotonic_ns();
  KernelFeatures features = probe_kernel_features();
  const uint64_t t_probed = monotonic_ns();
  if (!features.btf)
    throw runtime_error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux): "
        "offcpu needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
  if (opts.verbose)
    note("kernel: " + describe_features(features));

  // Opened before tracing, so an unwritable path fails before any wait.
  std::vector<OutputTarget> targets = opts.output.targets;
  if (targets.empty())
    targets.push_back({"", opts.output.format});
  std::vector<std::unique_ptr<OutputFile>> files;
  for (const OutputTarget &t : targets)
    files.push_back(std::make_unique<OutputFile>(
        t.path.empty() ? std::nullopt : std::optional<std::string>(t.path)));
  auto session = OffcpuSession::load(
      opts, offcpu_plans(features, opts.attach, opts.kernel_unwind),
      opts.verbose);
  if (stop_requested()) {
    note("interrupted before tracing started; nothing collected");
    return kExitInterrupted;
  }
  const uint64_t t_loaded = monotonic_ns();
  session->attach(opts.duration_s ? *opts.duration_s : -1.0);
  if (opts.verbose) {
    uint64_t t = monotonic_ns();
    auto ms = [](uint64_t a, uint64_t b) {
      return std::to_string((b - a) / 1000000);
    };
    const uint64_t opened = session->window_start_ns();
    note("attached after " + ms(t_start, opened) + " ms: probe " +
         ms(t_start, t_probed) + ", load " + ms(t_probed, t_loaded) +
         ", attach " + ms(t_loaded, opened) +
         "; window opened then; waits already in progress seeded in " +
         ms(opened, t) + " ms");
  }

  std::string what = "Tracing off-CPU time (us) of " + target_description(opts);
  if (opts.duration_s) {
    char secs[32];
    snprintf(secs, sizeof(secs), "%g", *opts.duration_s);
    what += std::string(" for ") + secs + " s";
  }
  note(what + (opts.duration_s ? "... Hit Ctrl-C to end early."
                               : "... Hit Ctrl-C to end."));
  const int64_t wall_start = wall_clock_ns();

  Symbolizer symbolizer(system_files(), KernelSymbols{});
  symbolizer.add_debug_dirs(opts.output.debug_dirs);
  {
    PriorityBoost boost(kTracingNice);
    collect_with_progress(*session, opts, symbolizer);
    session->stop();
  }
  RawProfile raw = session->drain();

  std::string fallback;
  symbolizer.set_kernel_symbols(kernel_symbols_for(
      kernel_addresses(raw.counts, raw.stacks), {}, system_files(), &fallback));
  if (!fallback.empty() && opts.verbose)
    note("kernel frames named from /proc/kallsyms: " + fallback);
  if (symbolizer.kernel_symbols().addresses_hidden())
    note("warning: /proc/kallsyms shows no addresses; kernel frames will be "
         "[unknown] (kernel.kptr_restrict)");
  StackSelection show{!opts.kernel_stacks_only, !opts.user_stacks_only};
  std::vector<Sample> samples = symbolize_profile(raw, symbolizer, show);
  merge_partial_kernel_stacks(samples);

  PprofOptions pp;
  pp.time_nanos = wall_start;
  pp.duration_nanos = static_cast<int64_t>(raw.window_ns);
  pp.comment =
      "offcpu " OFFCPU_VERSION ": off-CPU time of " + target_description(opts);
  // Every file is complete before any is renamed into place.
  bool reader_gone = false;
  for (size_t i = 0; i < targets.size(); i++) {
    OutputOptions one = opts.output;
    one.format = targets[i].format;
    std::string bytes =
        one.format == OutputFormat::Text
            ? format_text(samples, TextOptions{one.delimited})
            : render_samples(samples, one, "Off-CPU Time Flame Graph", pp);
    reader_gone |= files[i]->write(bytes) != WriteResult::Ok;
  }
  if (!reader_gone)
    for (auto &f : files)
      f->commit();

  std::string losses =
      describe_losses(raw.lost, opts.stack_storage_size, opts.max_entries);
  if (raw.missed_switches)
    losses += "offcpu: warning: " + std::to_string(raw.missed_switches) +
              " context switches were not seen (the kernel skipped the "
              "hook: its recursion guard); waits may be missing\n";
  if (raw.unseen_switch_ins && session->plan().kstack_at_switch_in)
    losses += "offcpu: warning: " + std::to_string(raw.unseen_switch_ins) +
              " waits ended by switch-ins the kernel did not report "
              "(sched_switch skipped them): their time is recovered from the "
              "scheduler's accounting, their kernel stacks are lost ([Missed "
              "Kernel Stack])\n";
  losses += symbolizer.describe_losses();
  fputs(losses.c_str(), stderr);
  if (opts.verbose) {
    const SymbolizeStats &st = symbolizer.stats();
    if (raw.unseen_switch_ins && !session->plan().kstack_at_switch_in)
      note(std::to_string(raw.unseen_switch_ins) +
           " switch-ins the kernel did not report: their waits were ended "
           "from its scheduler accounting (sched_info)");
    note("window: " + std::to_string(session->window_start_ns()) + " to " +
         std::to_string(session->window_start_ns() + raw.window_ns) +
         " ns (CLOCK_MONOTONIC)");
    note("collected " + std::to_string(raw.counts.size()) +
         " thread/stack pairs, " + std::to_string(raw.stacks.size()) +
         " stacks over " + std::to_string(raw.window_ns / 1000000) + " ms");
    std::string line = "symbolization: " + std::to_string(st.named) +
                       " frames named, " + std::to_string(st.unnamed) +
                       " unnamed, " + std::to_string(st.elf_files_parsed) +
                       " ELF files parsed";
    for (const auto &[module, n] : st.unnamed_by_module)
      line += "; " + module + " " + std::to_string(n);
    note(line);
    if (session->plan().kstack_at_switch_in) {
      const auto &k = raw.kunwind;
      note("kernel unwind: " + std::to_string(k[OFFCPU_KUNWIND_SPLICED]) +
           " stacks finished by the kernel's walk, " +
           std::to_string(k[OFFCPU_KUNWIND_ORC_LOOKUPS]) +
           " ORC table searches, " +
           std::to_string(k[OFFCPU_KUNWIND_MISMATCH]) + " mismatches" +
           (opts.verify_kernel_unwind
                ? ", " + std::to_string(k[OFFCPU_KUNWIND_VERIFIED]) +
                      " verified against the kernel's walk"
                : std::string()));
    }
  }
  return kExitOk;
}

} // namespace offcpu
