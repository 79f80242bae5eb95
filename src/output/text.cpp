#include "output/text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <string_view>
#include <unordered_map>

#include "model/layout.h"

namespace offcpu {
namespace {

std::string us(uint64_t ns) {
  return std::to_string((ns + 500) / 1000) + " us";
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
    line += " " + s.lock->kind_frame() + " wait on " + s.lock->lock;
  return line + "\n";
}

// What the samples printed alike add up to.
struct Totals {
  uint64_t total_ns = 0, count = 0, runq_ns = 0, max_ns = 0;
  Latency latency;

  void add(const Sample &s) {
    total_ns += s.total_ns;
    count += s.count;
    runq_ns += std::min(s.runq_ns, s.total_ns);
    if (s.lock)
      max_ns = std::max(max_ns, s.lock->max_ns);
    latency.add(s.latency);
  }
};

// The p50 and p99 of a distribution: "~" says they are estimates at the
// histogram's resolution.
std::string quantiles(const Latency &l) {
  return "p50 ~" + us(l.quantile_ns(0.5)) + ", p99 ~" + us(l.quantile_ns(0.99));
}

// The histogram from its first to its last non-empty bucket, one line a
// bucket, as BCC's *dist tools print theirs.
std::string histogram_lines(const Latency &l) {
  size_t first = Latency::kBuckets, last = 0;
  uint64_t most = 0;
  for (size_t b = 0; b < Latency::kBuckets; b++)
    if (l.bucket(b)) {
      first = std::min(first, b);
      last = b;
      most = std::max(most, l.bucket(b));
    }
  if (first == Latency::kBuckets)
    return {};
  constexpr int kBar = 30;
  auto bound = [](uint64_t ns) { return std::to_string(ns / 1000); };
  const uint64_t top = Latency::high_ns(last);
  const int width = static_cast<int>(
      top == UINT64_MAX ? bound(Latency::low_ns(last)).size()
                        : std::to_string(top / 1000 - 1).size());
  char line[160];
  // The header over the bounds' columns ("low -> high"), then the counts.
  snprintf(line, sizeof(line), "        %*s : %-8s |%-*s|\n", 2 * width + 4,
           "us", "waits", kBar, "distribution");
  std::string out = line;
  for (size_t b = first; b <= last; b++) {
    const uint64_t n = l.bucket(b);
    int stars = static_cast<int>((n * kBar + most / 2) / most);
    if (n && stars == 0)
      stars = 1;
    const std::string high =
        Latency::high_ns(b) == UINT64_MAX
            ? "inf"
            : std::to_string(Latency::high_ns(b) / 1000 - 1);
    snprintf(line, sizeof(line), "        %*s -> %-*s : %-8" PRIu64 " |%-*s|\n",
             width, bound(Latency::low_ns(b)).c_str(), width, high.c_str(), n,
             kBar, std::string(static_cast<size_t>(stars), '*').c_str());
    out += line;
  }
  return out;
}

// The distribution's lines: the longest wait and the quantiles, for more
// than one wait (one wait is its own total); with `histograms` the bars.
std::string latency_lines(const Sample &s, const Totals &t, bool histograms) {
  if (t.latency.waits < 2)
    return {};
  std::string out;
  if (!s.lock)
    out = "        max " + us(t.latency.max_ns) + ", " + quantiles(t.latency) +
          "\n";
  if (histograms)
    out += histogram_lines(t.latency);
  return out;
}

std::string totals_line(const Sample &s, const Totals &t, bool runqueue) {
  const char *waits = t.count == 1 ? " wait" : " waits";
  if (s.lock) {
    uint64_t avg = t.count ? t.total_ns / t.count : 0;
    std::string line = "        " + std::to_string(t.count) + waits +
                       ", total " + us(t.total_ns) + ", max " + us(t.max_ns) +
                       ", avg " + us(avg);
    if (t.latency.waits > 1)
      line += ", " + quantiles(t.latency);
    return line + "\n";
  }
  std::string line =
      "        " + us(t.total_ns) + " in " + std::to_string(t.count) + waits;
  if (runqueue) {
    uint64_t runq = std::min(t.runq_ns, t.total_ns);
    line +=
        ": " + us(t.total_ns - runq) + " blocked, " + us(runq) + " runnable";
  }
  return line + "\n";
}

// The waker's part, leaf first as laid out, its comm (or marker) last.
std::string waker_lines(const Sample &s, const std::vector<Frame> &part) {
  std::string out = "    --\n";
  for (size_t i = 0; i + 1 < part.size(); i++)
    out += "    " + part[i].name + (part[i].inlined ? " [inlined]" : "") + "\n";
  if (s.waker->kind == Waker::Kind::Task)
    out += "    -                " + s.waker->comm + " (" +
           std::to_string(s.waker->tid) + ")\n";
  else if (!part.empty())
    out += "    " + part.back().name + "\n";
  return out;
}

// A sample's lines but its totals: what the reader sees of its stacks.
std::string stack_lines(const Sample &s, const LayoutOptions &layout) {
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
    out += it->kind == FrameKind::Delimiter
               ? "    --\n"
               : "    " + it->name + (it->inlined ? " [inlined]" : "") + "\n";
  }
  out += thread_line(s, thread, layout.thread);
  if (s.waker && waker != frames.end())
    out += waker_lines(s, std::vector<Frame>(waker + 1, frames.end()));
  return out;
}

// Samples whose printed lines are the same are one entry: their raw keys
// differ (two user stack ids symbolized alike, frames past the depth
// limit) but the reader cannot tell them apart.
struct Entry {
  const Sample *first = nullptr;
  std::string lines;
  Totals totals;
};

// The entries, in a deque so that the index can key them by views of
// their own lines (one copy of the report's text, not two: a whole-system
// run's report is megabytes, issue #27).
struct Entries {
  std::deque<Entry> all;
  std::vector<Entry *> order; // report order, the ones shown
};

// The entries in report order. Off-CPU entries that round to 0 us are left
// out; lock waits are all shown (a contention is news at any length).
void report_entries(const Profile &p, const LayoutOptions &layout,
                    Entries &out) {
  std::unordered_map<std::string_view, Entry *> index;
  for (const Sample &s : p.samples) {
    std::string lines = stack_lines(s, layout);
    auto it = index.find(lines);
    if (it == index.end()) {
      Entry &e = out.all.emplace_back(Entry{&s, std::move(lines), {}});
      it = index.emplace(e.lines, &e).first;
    }
    it->second->totals.add(s);
  }
  const bool locks = p.kind == ProfileKind::LockWaits;
  for (Entry &e : out.all)
    if (locks || e.totals.total_ns >= 500)
      out.order.push_back(&e);
  std::sort(out.order.begin(), out.order.end(),
            [locks](const Entry *a, const Entry *b) {
              if (a->totals.total_ns != b->totals.total_ns)
                return a->totals.total_ns < b->totals.total_ns;
              if (locks || a->first->tid != b->first->tid)
                return a->first->tid < b->first->tid;
              if (a->first->comm != b->first->comm)
                return a->first->comm < b->first->comm;
              return a->lines < b->lines;
            });
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

bool write_text(const Profile &profile, const LayoutOptions &layout,
                bool histograms, const TextSink &sink) {
  // Handed on in pieces of about this size, each entry's text freed once
  // in one: the report is never whole in memory.
  constexpr size_t kPiece = 64 << 10;
  Entries entries;
  report_entries(profile, layout, entries);
  std::string piece;
  for (Entry *e : entries.order) {
    piece += e->lines + totals_line(*e->first, e->totals, profile.runqueue) +
             latency_lines(*e->first, e->totals, histograms) + "\n";
    std::string().swap(e->lines);
    if (piece.size() >= kPiece) {
      if (!sink(piece))
        return false;
      piece.clear();
    }
  }
  return sink(piece + state_summary(profile.state_ns));
}

std::string render_text(const Profile &profile, const LayoutOptions &layout,
                        bool histograms) {
  return collect_text([&](const TextSink &sink) {
    return write_text(profile, layout, histograms, sink);
  });
}

std::string latency_histogram(const Latency &l) {
  return histogram_lines(l);
}

} // namespace offcpu
