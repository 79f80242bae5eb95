#include "run/report.h"

#include <algorithm>
#include <cstdio>

namespace offcpu {

namespace {

std::string seconds(uint64_t ns) {
  char buf[32];
  const double s = static_cast<double>(ns) / 1e9;
  snprintf(buf, sizeof(buf), s < 10 ? "%.3f s" : "%.0f s", s);
  return buf;
}

} // namespace

std::string time_share(uint64_t ns, uint64_t total_ns) {
  char pct[32];
  snprintf(pct, sizeof(pct), "%.1f%%",
           total_ns
               ? 100.0 * static_cast<double>(ns) / static_cast<double>(total_ns)
               : 0.0);
  return std::string("(") + pct + " of off-CPU time, " + seconds(ns) + ")";
}

std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries,
                            const LossTime *time, uint32_t skip) {
  std::string out;
  // `text` goes after the count and the time the loss carried.
  auto line = [&](int cause, const std::string &what, const std::string &text) {
    const uint64_t n = lost[cause];
    if (!n || (skip & (1u << cause)))
      return;
    out += "offcpu: warning: " + std::to_string(n) + " " + what;
    if (time && time->ns[cause])
      out += " " + time_share(time->ns[cause], time->total_ns);
    out += text + "\n";
  };
  const uint64_t more = more_stack_storage(stack_storage_size);
  line(OFFCPU_LOST_STACK_MAP_FULL, "stacks lost",
       ": stack storage full (shown as [Missed User Stack] or [Missed Kernel "
       "Stack]); raise --stack-storage-size to " +
           std::to_string(more) + " (now " +
           std::to_string(stack_storage_size) +
           (time ? ", " + std::to_string(time->stack_reserve) +
                       " of them kept for the stop pass)"
                 : ")"));
  line(OFFCPU_LOST_STACK_COLLISION, "stacks lost",
       " to hash collisions; raise --stack-storage-size");
  line(OFFCPU_LOST_AGG_MAP_FULL, "waits found the aggregation map full",
       ": too many distinct thread/stack pairs; their time is kept, summed "
       "per process without stacks ([Missed User Stack];[Missed Kernel "
       "Stack]); raise --max-entries (now " +
           std::to_string(max_entries) + ")");
  line(OFFCPU_LOST_OVERFLOW_FULL, "waits lost",
       ": the aggregation map and the per-process overflow were both full "
       "(more than 16384 processes); raise --max-entries (now " +
           std::to_string(max_entries) + ")");
  line(OFFCPU_LOST_START_STORE, "waits lost",
       ": the kernel could not store their start time (out of memory)");
  line(OFFCPU_LOST_USER_STACK_WALK, "user stacks could not be walked",
       ": not even their first frame was in an executable mapping or "
       "readable (shown as [Missed User Stack])");
  line(OFFCPU_LOST_KERNEL_STACK_WALK, "kernel stacks could not be walked",
       ": the walk found no frame (shown as [Missed Kernel Stack])");
  line(OFFCPU_LOST_WAKER_STORE, "wakers lost",
       ": too many distinct wakers ([waker lost]); raise "
       "--stack-storage-size (now " +
           std::to_string(stack_storage_size) + ")");
  line(OFFCPU_LOST_CHILD_UNTRACED, "child processes not traced",
       ", their off-CPU time missing: 65,536 traced processes were alive "
       "(the most --children follows); trace the rest with -p or "
       "system-wide");
  line(OFFCPU_LOST_EVENT_RING, "timeline events dropped",
       ": the kernel's events ring was full (offcpu fell behind); the "
       "other outputs still count their waits; raise --events-memory or "
       "--events-min");
  line(OFFCPU_LOST_SCRATCH_BUSY, "waits without stacks",
       ": another wait's stack walk on the same CPU had been preempted "
       "(fentry programs, kernels before 5.19; shown as [Missed ... "
       "Stack])");
  line(OFFCPU_LOST_HELD, "waits lost",
       ": their thread exited without a last switch-out the kernel reported, "
       "and they were not yet in the aggregation map");
  line(OFFCPU_LOST_ANNOUNCE, "new stacks announced late",
       " (announcement ring full): a process that exited before blocking on "
       "the same stack again may show [unknown]");
  return out;
}

uint64_t more_stack_storage(uint32_t size) {
  // Four times as many: a busy host's stacks grow slowly past the first.
  return std::min<uint64_t>(uint64_t{size} * 4, uint64_t{1} << 24);
}

namespace {

std::string percent(uint64_t part, uint64_t total) {
  char s[32];
  const double p =
      total ? 100.0 * static_cast<double>(part) / static_cast<double>(total)
            : 0.0;
  if (p > 0 && p < 0.1)
    return "<0.1%";
  snprintf(s, sizeof(s), "%.1f%%", p);
  return s;
}

} // namespace

std::string incomplete_summary(const IncompleteStacks &s) {
  const uint64_t waits = s.full_stacks + s.overflow_waits + s.lost_waits +
                         s.held_waits + s.no_user_waits + s.no_kernel_waits +
                         s.partial_waits;
  if (!waits && s.events.empty())
    return "";
  const uint64_t no_stack =
      s.no_stack_ns ? s.no_stack_ns : s.no_user_ns + s.no_kernel_ns;
  // `partial` may overlap the others: the share is capped at the whole.
  const uint64_t affected =
      std::min(s.total_ns, s.full_ns + s.overflow_ns + s.lost_ns + s.held_ns +
                               no_stack + s.partial_ns);
  // "P% what (N count)", then what to do where an option helps; causes
  // apart by "; " (a cause's own text may have commas).
  std::string causes;
  bool advised = false;
  auto cause = [&](uint64_t n, uint64_t ns, const std::string &what,
                   const char *count, const std::string &advice = "") {
    if (!n)
      return;
    causes += (causes.empty() ? "" : "; ") + percent(ns, s.total_ns) + " " +
              what + " (" + std::to_string(n) + " " + count + ")";
    if (!advice.empty()) {
      causes += ": " + advice;
      advised = true;
    }
  };
  const std::string more_entries =
      "raise --max-entries (now " + std::to_string(s.max_entries) + ")";
  cause(s.full_stacks, s.full_ns, "stack storage full", "stacks",
        "raise --stack-storage-size to " +
            std::to_string(more_stack_storage(s.stack_storage_size)) +
            " (now " + std::to_string(s.stack_storage_size) + ")");
  cause(s.overflow_waits, s.overflow_ns,
        "kept without stacks, the aggregation map full", "waits", more_entries);
  cause(s.lost_waits, s.lost_ns,
        "lost, the aggregation map and the per-process overflow both full",
        "waits", more_entries);
  cause(s.held_waits, s.held_ns,
        "lost, their thread gone without a last switch-out the kernel "
        "reported",
        "waits");
  cause(s.partial_waits, s.partial_ns,
        "walked before their process's unwind tables were ready, with frame "
        "pointers only or cut at a library whose table was being built",
        "waits");
  cause(s.no_user_waits, s.no_user_ns, "without a user stack", "waits");
  cause(s.no_kernel_waits, s.no_kernel_ns, "without a kernel stack", "waits");
  for (const std::string &e : s.events)
    causes += (causes.empty() ? "" : "; ") + e;
  const bool notable = advised || (s.total_ns && affected * 100 >= s.total_ns);
  std::string line = std::string("offcpu: ") + (notable ? "warning: " : "");
  if (waits)
    line +=
        percent(affected, s.total_ns) + " of the off-CPU time is on " +
        (s.lost_waits || s.held_waits ? "stacks that are not whole or lost: "
                                      : "stacks that are not whole: ");
  else
    line += "not all was seen: ";
  return line + causes + (advised ? "; " : "; no option changes this; ") +
         "-v lists each cause and what it cost\n";
}

std::string describe_truncated(size_t stacks, uint64_t waits, uint32_t depth) {
  if (!stacks)
    return "";
  const std::string d = std::to_string(depth);
  std::string fix =
      depth < OFFCPU_MAX_STACK_DEPTH
          ? "raise --perf-max-stack-depth (now " + d + ", at most " +
                std::to_string(OFFCPU_MAX_STACK_DEPTH) + ")"
          : d + " frames is the most offcpu keeps (--perf-max-stack-depth)";
  return "offcpu: warning: " + std::to_string(stacks) + " stacks deeper than " +
         d + " frames were cut (" + std::to_string(waits) +
         " waits): their root-side frames are missing, marked [truncated]; " +
         fix + "\n";
}

std::string symbolization_summary(const SymbolizeStats &st) {
  std::string line = "symbolization: " + std::to_string(st.named) +
                     " frames named, " + std::to_string(st.unnamed) +
                     " unnamed, " + std::to_string(st.elf_files_parsed) +
                     " ELF files parsed";
  if (st.dwarf_files)
    line += ", DWARF of " + std::to_string(st.dwarf_files) + " (" +
            std::to_string(st.dwarf_read_ahead) + " read in the window" +
            (st.dwarf_reopens ? ", " + std::to_string(st.dwarf_reopens) +
                                    " read again after being freed"
                              : std::string()) +
            "), " + std::to_string(st.frames_inlined) + " inlined frames";
  if (st.own_dwarf_skipped)
    line += ", offcpu's own frames by its symbols only (its DWARF not read)";
  for (const auto &[module, n] : st.unnamed_by_module)
    line += "; " + module + " " + std::to_string(n);
  return line;
}

} // namespace offcpu
