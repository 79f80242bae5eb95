#include "output/top_waits.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <vector>

namespace offcpu {
namespace {

std::string ms(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

void put_waker(std::string &out, const Timeline &t, const TimelineWaker &w,
               const char *indent) {
  out += std::string(indent) + "woken by " + waker_label(w) + "\n";
  std::string ws = joined_stack(t.stack(w.stack));
  if (!ws.empty())
    out += std::string(indent) + "  waker stack: " + ws + "\n";
}

} // namespace

std::string wall_clock_text(uint64_t monotonic_ns, int64_t realtime_offset_ns) {
  const int64_t real = static_cast<int64_t>(monotonic_ns) + realtime_offset_ns;
  time_t secs = static_cast<time_t>(real / 1000000000);
  struct tm tm {};
  localtime_r(&secs, &tm);
  char buf[64];
  snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%06" PRId64, tm.tm_hour, tm.tm_min,
           tm.tm_sec, (real % 1000000000) / 1000);
  return buf;
}

std::string render_top_waits(const Timeline &t, size_t n) {
  std::vector<const TimelineWait *> order;
  for (const TimelineWait &w : t.waits)
    order.push_back(&w);
  std::stable_sort(order.begin(), order.end(),
                   [](const TimelineWait *a, const TimelineWait *b) {
                     return a->duration_ns > b->duration_ns;
                   });
  if (order.size() > n)
    order.resize(n);
  std::string out = "Longest waits (" + std::to_string(order.size()) + " of " +
                    std::to_string(t.waits.size()) + " of at least " +
                    ms(t.events_min_ns) + "):\n";
  for (const TimelineWait *w : order) {
    out += "\n" + wall_clock_text(w->start_ns, t.realtime_offset_ns) + "  " +
           w->comm + "-" + std::to_string(w->tid) + " (PID " +
           std::to_string(w->tgid) + ")  " + ms(w->duration_ns) + "  [" +
           std::string(1, w->state ? w->state : '?') + "]";
    if (w->runq_ns)
      out += "  runqueue " + ms(w->runq_ns);
    out += "\n  stack: " + joined_stack(t.stack(w->stack)) + "\n";
    put_waker(out, t, w->waker, "  ");
    for (size_t i = 0; i < w->chain.size(); i++) {
      const TimelineHop &h = w->chain[i];
      out += "  chain " + std::to_string(i + 1) + ": " + h.comm + "-" +
             std::to_string(h.tid) + " waited " + ms(h.duration_ns) + " from " +
             wall_clock_text(h.start_ns, t.realtime_offset_ns) + " [" +
             std::string(1, h.state ? h.state : '?') + "]\n";
      out += "    stack: " + joined_stack(t.stack(h.stack)) + "\n";
      put_waker(out, t, h.waker, "    ");
    }
  }
  return out;
}

} // namespace offcpu
