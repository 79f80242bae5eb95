#include "output/text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "model/layout.h"

namespace offcpu {
namespace {

std::string us(uint64_t ns) {
  return std::to_string((ns + 500) / 1000) + " us";
}

// The samples in report order. Off-CPU samples that round to 0 us are left
// out; lock waits are all shown (a contention is news at any length).
std::vector<const Sample *> report_order(const Profile &p) {
  std::vector<const Sample *> order;
  const bool locks = p.kind == ProfileKind::LockWaits;
  for (const Sample &s : p.samples)
    if (locks || s.total_ns >= 500)
      order.push_back(&s);
  std::sort(order.begin(), order.end(),
            [locks](const Sample *a, const Sample *b) {
              if (a->total_ns != b->total_ns)
                return a->total_ns < b->total_ns;
              if (locks || a->tid != b->tid)
                return a->tid < b->tid;
              return a->comm < b->comm;
            });
  return order;
}

// "comm (tid)", or the thread frame of --per-pid / --per-thread (which
// already ends in the tid); the cgroup of --per-cgroup, the lock of a lock
// wait.
std::string thread_line(const Sample &s, const std::string &thread,
                        ThreadFrame how) {
  std::string line = "    -                " + thread;
  if (how != ThreadFrame::Thread)
    line += " (" + std::to_string(s.tid) + ")";
  if (!s.cgroup.empty())
    line += " in " + s.cgroup;
  if (s.lock)
    line += std::string(" ") + (s.lock->write ? "write" : "read") +
            " wait on " + s.lock->lock;
  return line + "\n";
}

std::string totals_line(const Sample &s, bool runqueue) {
  const char *waits = s.count == 1 ? " wait" : " waits";
  if (s.lock) {
    uint64_t avg = s.count ? s.total_ns / s.count : 0;
    return "        " + std::to_string(s.count) + waits + ", total " +
           us(s.total_ns) + ", max " + us(s.lock->max_ns) + ", avg " + us(avg) +
           "\n";
  }
  std::string line =
      "        " + us(s.total_ns) + " in " + std::to_string(s.count) + waits;
  if (runqueue) {
    uint64_t runq = std::min(s.runq_ns, s.total_ns);
    line +=
        ": " + us(s.total_ns - runq) + " blocked, " + us(runq) + " runnable";
  }
  return line + "\n";
}

// The waker's part, leaf first as laid out, its comm (or marker) last.
std::string waker_lines(const Sample &s, const std::vector<Frame> &part) {
  std::string out = "    --\n";
  for (size_t i = 0; i + 1 < part.size(); i++)
    out += "    " + part[i].name + "\n";
  if (s.waker->kind == Waker::Kind::Task)
    out += "    -                " + s.waker->comm + " (" +
           std::to_string(s.waker->tid) + ")\n";
  else if (!part.empty())
    out += "    " + part.back().name + "\n";
  return out;
}

std::string entry(const Sample &s, const LayoutOptions &layout, bool runqueue) {
  std::vector<Frame> frames = lay_out(s, layout);
  auto waker = std::find_if(frames.begin(), frames.end(), [](const Frame &f) {
    return f.kind == FrameKind::WakerDelimiter;
  });
  std::string out;
  // The waiting thread leaf first; the thread itself gets its own line.
  // The thread, its cgroup and the lock get their own line.
  std::string thread = s.comm;
  for (auto it = std::make_reverse_iterator(waker); it != frames.rend(); ++it) {
    if (it->kind == FrameKind::Thread)
      thread = it->name;
    if (it->kind == FrameKind::Thread || it->kind == FrameKind::Group ||
        it->kind == FrameKind::Lock)
      continue;
    out += it->kind == FrameKind::Delimiter ? "    --\n"
                                            : "    " + it->name + "\n";
  }
  out += thread_line(s, thread, layout.thread);
  if (s.waker && waker != frames.end())
    out += waker_lines(s, std::vector<Frame>(waker + 1, frames.end()));
  return out + totals_line(s, runqueue) + "\n";
}

// The state classes of offcpu_state_class, in its order.
struct StateName {
  const char *letter, *meaning;
};
constexpr StateName kStates[] = {
    {"R", "preempted (runnable)"},       {"S", "sleeping (interruptible)"},
    {"D", "uninterruptible (not idle)"}, {"I", "idle (TASK_IDLE)"},
    {"T", "stopped, traced or other"},
};

std::string state_summary(const std::vector<uint64_t> &state_ns) {
  uint64_t total = 0;
  for (uint64_t ns : state_ns)
    total += ns;
  if (total == 0)
    return {};
  std::string out = "Off-CPU time by the state each wait began in:\n";
  for (size_t i = 0; i < state_ns.size() && i < std::size(kStates); i++) {
    if (!state_ns[i])
      continue;
    char line[128];
    snprintf(line, sizeof(line), "    %s  %-28s %14" PRIu64 " us  %5.1f%%\n",
             kStates[i].letter, kStates[i].meaning, (state_ns[i] + 500) / 1000,
             100.0 * static_cast<double>(state_ns[i]) /
                 static_cast<double>(total));
    out += line;
  }
  return out;
}

} // namespace

std::string render_text(const Profile &profile, const LayoutOptions &layout) {
  std::string out;
  for (const Sample *s : report_order(profile))
    out += entry(*s, layout, profile.runqueue);
  return out + state_summary(profile.state_ns);
}

} // namespace offcpu
