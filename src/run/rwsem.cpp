#include "run/rwsem.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "collect/lock_sample.h"
#include "collect/map_budget.h"
#include "collect/rwsem_session.h"
#include "output/lock_text.h"
#include "probe/features.h"
#include "run/emit.h"
#include "run/profile.h"
#include "symbolize/kernel_namer.h"
#include "util/error.h"
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

std::string clock_time() {
  time_t now = time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  char buf[16];
  strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

// SVG and pprof describe the whole run: they are written once, at the end.
bool whole_run_format(const RwsemOptions &o) {
  return o.output.format == OutputFormat::Svg ||
         o.output.format == OutputFormat::Pprof;
}

// Names one interval's kernel frames and locks (see kernel_namer.h). Where
// the kernel cannot, all of /proc/kallsyms is read once and kept.
void name_kernel(const RawLockWaits &raw, Symbolizer &sym, bool &on_kallsyms,
                 bool verbose) {
  if (on_kallsyms)
    return;
  std::vector<uint64_t> locks;
  for (const auto &kv : raw.waits)
    if (!(kv.first.flags & RWSEM_LOCK_IS_MMAP))
      locks.push_back(kv.first.lock);
  std::string fallback;
  sym.set_kernel_symbols(
      kernel_symbols_for(kernel_addresses(raw.waits, raw.stacks), locks,
                         system_files(), &fallback));
  if (fallback.empty())
    return;
  on_kallsyms = true;
  if (verbose)
    note("kernel frames named from /proc/kallsyms: " + fallback);
}

// Writes one interval's report (text or folded), or keeps the samples for
// the end. Returns false when stdout is gone.
bool report(const RawLockWaits &raw, Symbolizer &sym, const RwsemOptions &o,
            double seconds, OutputFile &out, std::vector<Sample> &whole_run) {
  std::vector<LockSample> samples =
      symbolize_lock_waits(raw, sym, StackSelection{});
  if (whole_run_format(o)) {
    for (LockSample &ls : samples)
      whole_run.push_back(std::move(ls.wait));
    return true;
  }
  std::string text;
  if (o.output.format == OutputFormat::Folded) {
    text = format_lock_folded(samples, o.output.delimited);
  } else {
    char head[96];
    snprintf(head, sizeof(head), "[%s] rwsem waits over %.1f s%s\n",
             clock_time().c_str(), seconds, samples.empty() ? ": none" : "");
    text = head + format_lock_text(samples, o.output.delimited);
  }
  return out.write(text) == WriteResult::Ok;
}

} // namespace

bool process_name_exists(const std::string &name, bool threads) {
  DIR *proc = opendir("/proc");
  if (!proc)
    return false;
  bool found = false;
  while (!found) {
    dirent *e = readdir(proc);
    if (!e)
      break;
    if (!all_digits(e->d_name))
      continue;
    std::string dir = std::string("/proc/") + e->d_name;
    if (!threads) {
      found = read_comm(dir + "/comm") == name;
      continue;
    }
    if (DIR *tasks = opendir((dir + "/task").c_str())) {
      while (dirent *t = readdir(tasks))
        if (all_digits(t->d_name) &&
            read_comm(dir + "/task/" + t->d_name + "/comm") == name)
          found = true;
      closedir(tasks);
    }
  }
  closedir(proc);
  return found;
}

int run_rwsem(const RwsemOptions &opts) {
  install_stop_handlers();
  require_bpf_privileges();
  capture_libbpf_messages(opts.verbose);
  check_map_budget({opts.stack_storage_size, opts.max_entries,
                    sizeof(rwsem_key) + sizeof(rwsem_value)},
                   system_files());
  RwsemFeatures features = probe_rwsem_features();
  if (!features.btf)
    throw runtime_error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux): "
        "offcpu needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
  OutputFile out(opts.output.path);
  auto session = RwsemSession::load(opts, rwsem_plans(features, opts.attach),
                                    opts.verbose);
  if (stop_requested()) {
    note("interrupted before tracing started; nothing collected");
    return kExitInterrupted;
  }

  std::string who;
  if (!opts.name.empty()) {
    who = (opts.match_thread_name ? "threads named '" : "processes named '") +
          opts.name + "'";
    if (!process_name_exists(opts.name, opts.match_thread_name))
      note(std::string("no ") +
           (opts.match_thread_name ? "thread" : "process") + " named '" +
           opts.name + "' yet; tracing it when it starts");
  }
  if (!opts.pids.empty()) {
    std::string list;
    for (uint32_t p : opts.pids)
      list += (list.empty() ? "" : ",") + std::to_string(p);
    who += (who.empty() ? "PID " : " in PID ") + list;
  }
  note(std::string("Tracing rwsem ") +
       (opts.include_read ? "read and write" : "write") + " waits of " + who +
       "... Hit Ctrl-C to end.");

  Symbolizer symbolizer(system_files(), KernelSymbols{});
  bool on_kallsyms = false;
  symbolizer.add_debug_dirs(opts.output.debug_dirs);
  const int64_t wall_start = wall_clock_ns();
  // Processes announced while blocked get their maps and files captured
  // then: one that exits before the report keeps its names.
  auto remember = [&](uint32_t tgid, uint64_t stack, uint32_t parent) {
    symbolizer.note_user_stack(tgid, stack, session->read_stack(stack), parent);
  };
  auto parse = [&](uint64_t deadline) {
    return symbolizer.parse_pending(deadline);
  };
  std::vector<Sample> whole_run;
  const double start = static_cast<double>(monotonic_ns()) / 1e9;
  double last = start;
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  for (;;) {
    double now = static_cast<double>(monotonic_ns()) / 1e9;
    double step =
        opts.interval_s > 0 && !whole_run_format(opts) ? opts.interval_s : -1;
    if (opts.duration_s) {
      double left = start + *opts.duration_s - now;
      step = step < 0 ? left : std::min(step, left);
    }
    bool interrupted = false;
    if (step != 0) {
      PriorityBoost boost(kTracingNice);
      interrupted = session->wait(
          step < 0 ? 0 : monotonic_ns() + static_cast<uint64_t>(step * 1e9),
          remember, parse);
    }
    now = static_cast<double>(monotonic_ns()) / 1e9;
    bool final = interrupted || stop_requested() ||
                 (opts.duration_s && now - start >= *opts.duration_s - 1e-3);
    RawLockWaits raw = final ? session->stop_and_drain() : session->drain();
    lost = raw.lost;
    name_kernel(raw, symbolizer, on_kallsyms, opts.verbose);
    if (!report(raw, symbolizer, opts, now - last, out, whole_run))
      return kExitOk; // stdout closed: nobody is listening
    last = now;
    if (final)
      break;
  }
  if (whole_run_format(opts)) {
    PprofOptions pp;
    pp.count_type = "contentions";
    pp.time_type = "delay";
    pp.time_nanos = wall_start;
    pp.duration_nanos =
        static_cast<int64_t>(session->stopped_ns() - session->attached_ns());
    pp.comment = "offcpu " OFFCPU_VERSION ": rwsem waits of " + who;
    if (out.write(render_samples(whole_run, opts.output,
                                 "rwsem Wait Flame Graph", pp)) !=
        WriteResult::Ok)
      return kExitOk;
  }
  out.commit();
  fputs((describe_losses(lost, opts.stack_storage_size, opts.max_entries) +
         symbolizer.describe_losses())
            .c_str(),
        stderr);
  if (opts.verbose) {
    note("traced from " + std::to_string(session->attached_ns()) + " to " +
         std::to_string(session->stopped_ns()) + " ns (CLOCK_MONOTONIC)");
    const SymbolizeStats &st = symbolizer.stats();
    note("symbolization: " + std::to_string(st.named) + " frames named, " +
         std::to_string(st.unnamed) + " unnamed");
  }
  return kExitOk;
}

} // namespace offcpu
