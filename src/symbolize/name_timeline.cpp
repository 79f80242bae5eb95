#include "symbolize/name_timeline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "symbolize/name_samples.h"
#include "util/fs.h"
#include "util/utf8.h"

namespace offcpu {
namespace {

char state_of(uint32_t state) {
  static const char letters[] = "RSDIT";
  uint32_t cls = offcpu_state_class(state);
  return cls < OFFCPU_STATE_NR ? letters[cls] : 0;
}

// What a wait's naming leaves the timeline: its stacks by reference.
struct NamedWait {
  uint32_t tgid = 0, tid = 0;
  std::string comm;
  uint32_t stack = 0;
  TimelineWaker waker;
};

// Each distinct stack pair once in the timeline, found again by its frames'
// names and kinds (what the outputs show).
class StackInterner {
public:
  explicit StackInterner(Timeline &t) : t_(t) {}
  uint32_t intern(std::vector<Frame> user, std::vector<Frame> kernel,
                  bool user_missed = false, bool kernel_missed = false) {
    if (user.empty() && kernel.empty() && !user_missed && !kernel_missed)
      return 0;
    std::string key;
    key += user_missed ? '1' : '0';
    key += kernel_missed ? '1' : '0';
    for (const auto *frames : {&user, &kernel}) {
      for (const Frame &f : *frames) {
        key += static_cast<char>('a' + static_cast<int>(f.kind));
        key += f.name;
        key += '\n';
      }
      key += '\0';
    }
    auto [it, fresh] =
        index_.emplace(std::move(key), static_cast<uint32_t>(t_.stacks.size()));
    if (fresh) {
      TimelineStack st;
      st.user = std::move(user);
      st.kernel = std::move(kernel);
      st.user_missed = user_missed;
      st.kernel_missed = kernel_missed;
      t_.stacks.push_back(std::move(st));
    }
    return it->second;
  }

private:
  Timeline &t_;
  std::unordered_map<std::string, uint32_t> index_;
};

// Names waits, each distinct (thread, stacks, waker) once.
class WaitNamer {
public:
  WaitNamer(const RawProfile &raw, Symbolizer &sym, StackInterner &stacks)
      : raw_(raw), sym_(sym), stacks_(stacks) {}
  const NamedWait &name(uint32_t tgid, uint32_t tid, const char *comm,
                        uint64_t user, uint64_t kernel, uint64_t waker) {
    Key k{tgid, tid, user, kernel, waker, std::string(comm, strnlen(comm, 16))};
    auto it = cache_.find(k);
    if (it != cache_.end())
      return it->second;
    Sample s = name_wait(scratch_, tgid, tid, comm, OFFCPU_COMM_LEN, user,
                         kernel, waker, raw_, sym_);
    NamedWait n;
    n.tgid = s.tgid;
    n.tid = s.tid;
    n.comm = s.comm;
    n.stack = stacks_.intern(s.user.to_vector(), s.kernel.to_vector(),
                             s.user_missed, s.kernel_missed);
    if (s.waker) {
      n.waker.kind = s.waker->kind;
      n.waker.tgid = s.waker->tgid;
      n.waker.tid = s.waker->tid;
      n.waker.comm = s.waker->comm;
      n.waker.stack = stacks_.intern(s.waker->user.to_vector(),
                                     s.waker->kernel.to_vector());
    }
    return cache_.emplace(std::move(k), std::move(n)).first->second;
  }

private:
  using Key =
      std::tuple<uint32_t, uint32_t, uint64_t, uint64_t, uint64_t, std::string>;
  const RawProfile &raw_;
  Symbolizer &sym_;
  StackInterner &stacks_;
  Profile scratch_; // the frames' modules, which the timeline does not use
  std::map<Key, NamedWait> cache_;
};

// Per thread, its events' indexes by end time.
using EndIndex = std::unordered_map<uint32_t, std::vector<size_t>>;

EndIndex index_by_end(const std::vector<offcpu_event> &ev) {
  EndIndex by_tid;
  for (size_t i = 0; i < ev.size(); i++)
    by_tid[ev[i].pid].push_back(i);
  for (auto &[tid, list] : by_tid)
    std::sort(list.begin(), list.end(), [&ev](size_t a, size_t b) {
      return ev[a].start_ns + ev[a].duration_ns <
             ev[b].start_ns + ev[b].duration_ns;
    });
  return by_tid;
}

// The waker's own event that ended last at or before `at`, or -1.
long last_event_before(const std::vector<offcpu_event> &ev,
                       const EndIndex &by_tid, uint32_t tid, uint64_t at) {
  auto it = by_tid.find(tid);
  if (it == by_tid.end())
    return -1;
  long found = -1;
  for (size_t i : it->second) {
    if (ev[i].start_ns + ev[i].duration_ns > at)
      break;
    found = static_cast<long>(i);
  }
  return found;
}

TimelineHop hop_of(const NamedWait &s, uint64_t start, uint64_t duration,
                   uint32_t state) {
  TimelineHop h;
  h.tgid = s.tgid;
  h.tid = s.tid;
  h.comm = s.comm;
  h.start_ns = start;
  h.duration_ns = duration;
  h.state = state_of(state);
  h.stack = s.stack;
  h.waker = s.waker;
  return h;
}

class ChainBuilder {
public:
  ChainBuilder(const RawTimeline &events, WaitNamer &namer, uint32_t depth)
      : ev_(events.events), by_end_(index_by_end(ev_)), namer_(namer),
        depth_(depth) {}

  // The hops of the wait `e`, woken by `w`: the waker's last wait as the
  // BPF side copied it at the wakeup, then each waker's own last event.
  std::vector<TimelineHop> chain(const offcpu_event &e,
                                 const TimelineWaker &w) {
    std::vector<TimelineHop> out;
    if (!depth_ || w.kind != Waker::Kind::Task)
      return out;
    const offcpu_hop &h = e.hop;
    const uint64_t end = e.start_ns + e.duration_ns;
    if (h.end_ns && h.pid == w.tid && h.end_ns <= end) {
      char comm[OFFCPU_COMM_LEN] = {};
      std::memcpy(comm, w.comm.data(),
                  std::min(w.comm.size(), sizeof(comm) - 1));
      const NamedWait &s = namer_.name(w.tgid, h.pid, comm, h.user_stack,
                                       h.kernel_stack, h.waker);
      out.push_back(hop_of(s, h.start_ns, h.end_ns - h.start_ns, h.state));
    } else {
      // No copy (the waker had not waited since tracing began, or ran on
      // a kernel without task storage): its own event, if it had one.
      if (!add_event_hop(out, w.tid, end))
        return out;
    }
    while (out.size() < depth_) {
      const TimelineHop &last = out.back();
      if (last.waker.kind != Waker::Kind::Task ||
          !add_event_hop(out, last.waker.tid, last.start_ns + last.duration_ns))
        break;
    }
    return out;
  }

private:
  bool add_event_hop(std::vector<TimelineHop> &out, uint32_t tid, uint64_t at) {
    long i = last_event_before(ev_, by_end_, tid, at);
    if (i < 0)
      return false;
    const offcpu_event &x = ev_[static_cast<size_t>(i)];
    const NamedWait &s = namer_.name(x.tgid, x.pid, x.comm, x.user_stack,
                                     x.kernel_stack, x.waker);
    out.push_back(hop_of(s, x.start_ns, x.duration_ns, x.state));
    return true;
  }

  const std::vector<offcpu_event> &ev_;
  EndIndex by_end_;
  WaitNamer &namer_;
  uint32_t depth_;
};

// Each process's name: its main thread's comm as an event has it, else as
// /proc has it now (through the confined reader), else the first thread's.
void name_processes(Timeline &t) {
  std::map<uint32_t, std::string> names, fallback;
  for (const TimelineWait &w : t.waits) {
    if (w.tid == w.tgid)
      names[w.tgid] = w.comm;
    fallback.emplace(w.tgid, w.comm);
  }
  for (const auto &[tgid, comm] : fallback) {
    if (names.count(tgid))
      continue;
    auto text =
        system_files().read("/proc/" + std::to_string(tgid) + "/comm", 64);
    std::string n = text ? *text : comm;
    if (!n.empty() && n.back() == '\n')
      n.pop_back();
    names[tgid] = valid_utf8(n.empty() ? comm : n);
  }
  t.processes.assign(names.begin(), names.end());
}

} // namespace

long find_waker_event(const std::vector<offcpu_event> &by_start,
                      const ChainLink &link) {
  return last_event_before(by_start, index_by_end(by_start), link.waker_tid,
                           link.woken_at_ns);
}

Timeline build_timeline(const RawTimeline &events, const RawProfile &raw,
                        Symbolizer &sym, const TimelineSetup &setup) {
  Timeline t;
  t.window_start_ns = setup.window_start_ns;
  t.window_end_ns = setup.window_end_ns;
  t.realtime_offset_ns = setup.realtime_offset_ns;
  t.events_min_ns = setup.events_min_ns;
  t.lost_ring = raw.lost[OFFCPU_LOST_EVENT_RING];
  t.lost_ring_ns = raw.lost_ns[OFFCPU_LOST_EVENT_RING];
  t.lost_store = events.dropped;
  t.lost_store_ns = events.dropped_ns;
  StackInterner stacks(t);
  WaitNamer namer(raw, sym, stacks);
  ChainBuilder chains(events, namer, setup.chain_depth);
  t.waits.reserve(events.events.size());
  for (const offcpu_event &e : events.events) {
    const NamedWait &s = namer.name(e.tgid, e.pid, e.comm, e.user_stack,
                                    e.kernel_stack, e.waker);
    TimelineWait w;
    w.tgid = e.tgid;
    w.tid = e.pid;
    w.comm = s.comm;
    w.start_ns = e.start_ns;
    w.duration_ns = e.duration_ns;
    w.runq_ns = e.runq_ns;
    w.state = state_of(e.state);
    w.stack = s.stack;
    w.waker = s.waker;
    w.chain = chains.chain(e, w.waker);
    t.waits.push_back(std::move(w));
  }
  std::stable_sort(t.waits.begin(), t.waits.end(),
                   [](const TimelineWait &a, const TimelineWait &b) {
                     return a.start_ns < b.start_ns;
                   });
  name_processes(t);
  return t;
}

} // namespace offcpu
