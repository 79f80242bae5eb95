#include "output/text.h"

#include <algorithm>

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
// already ends in the tid).
std::string thread_line(const Sample &s, const std::string &thread,
                        ThreadFrame how) {
  std::string line = "    -                " + thread;
  if (how != ThreadFrame::Thread)
    line += " (" + std::to_string(s.tid) + ")";
  if (s.lock)
    line += std::string(" ") + (s.lock->write ? "write" : "read") +
            " wait on " + s.lock->lock;
  return line + "\n";
}

std::string totals_line(const Sample &s) {
  const char *waits = s.count == 1 ? " wait" : " waits";
  if (!s.lock)
    return "        " + us(s.total_ns) + " in " + std::to_string(s.count) +
           waits + "\n";
  uint64_t avg = s.count ? s.total_ns / s.count : 0;
  return "        " + std::to_string(s.count) + waits + ", total " +
         us(s.total_ns) + ", max " + us(s.lock->max_ns) + ", avg " + us(avg) +
         "\n";
}

} // namespace

std::string render_text(const Profile &profile, const LayoutOptions &layout) {
  std::string out;
  for (const Sample *s : report_order(profile)) {
    std::vector<Frame> frames = lay_out(*s, layout);
    // Leaf first; the thread (the root) and the lock get their own line
    // below.
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      if (it->kind == FrameKind::Thread || it->kind == FrameKind::Lock)
        continue;
      out += it->kind == FrameKind::Delimiter ? "    --\n"
                                              : "    " + it->name + "\n";
    }
    out += thread_line(*s, frames.front().name, layout.thread) +
           totals_line(*s) + "\n";
  }
  return out;
}

} // namespace offcpu
