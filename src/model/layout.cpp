#include "model/layout.h"

#include <algorithm>

namespace offcpu {
namespace {

Frame annotation(std::string name, FrameKind kind = FrameKind::Annotation) {
  return {std::move(name), kind, kNoModule, 0};
}

// Where a line's frames go: by reference, the new ones kept in `own`.
class LineOut {
public:
  LineOut(std::vector<const Frame *> &frames, std::deque<Frame> &own)
      : frames_(frames), own_(own) {}
  void add(const Frame &f) { frames_.push_back(&f); }
  void add(Frame &&f) {
    own_.push_back(std::move(f));
    frames_.push_back(&own_.back());
  }
  void add_all(const Frames &fs) {
    for (const Frame &f : fs)
      frames_.push_back(&f);
  }

private:
  std::vector<const Frame *> &frames_;
  std::deque<Frame> &own_;
};

// The waker's part: "--", its kernel then user frames leaf first, its comm;
// or the marker of a wakeup without a task.
void add_waker(const Waker &w, LineOut &out) {
  out.add(annotation("--", FrameKind::WakerDelimiter));
  auto as_waker = [](Frame f) {
    f.kind = FrameKind::Waker;
    return f;
  };
  for (auto it = w.kernel.rbegin(); it != w.kernel.rend(); ++it)
    out.add(as_waker(*it));
  if (w.kind != Waker::Kind::Task) {
    out.add(annotation(waker_marker(w.kind), FrameKind::Waker));
    return;
  }
  for (auto it = w.user.rbegin(); it != w.user.rend(); ++it)
    out.add(as_waker(*it));
  out.add(annotation(w.comm, FrameKind::Waker));
}

// The sample's line (see layout.h) into `out`.
void lay_out_into(const Sample &s, const LayoutOptions &opts, LineOut &out) {
  if (!s.cgroup.empty())
    out.add(Frame{s.cgroup, FrameKind::Group, kNoModule, 0});
  out.add(Frame{thread_frame_name(s, opts.thread), FrameKind::Thread, kNoModule,
                0});
  // The state classes the whole wait: it splits a flame graph's towers
  // right under the thread, as the text report's per-state totals do.
  if (s.state)
    out.add(annotation(std::string("[") + s.state + "]"));
  if (s.user_missed)
    out.add(Frame{"[Missed User Stack]", FrameKind::Marker, kNoModule, 0});
  out.add_all(s.user);
  bool has_user = s.user_missed || !s.user.empty();
  bool has_kernel = s.kernel_missed || !s.kernel.empty();
  if (opts.delimited && has_user && has_kernel)
    out.add(Frame{"-", FrameKind::Delimiter, kNoModule, 0});
  if (s.kernel_missed)
    out.add(Frame{"[Missed Kernel Stack]", FrameKind::Marker, kNoModule, 0});
  out.add_all(s.kernel);
  // What was waited for tops the stack: the side, then the lock itself.
  if (s.lock) {
    out.add(Frame{s.lock->kind_frame(), FrameKind::Lock, kNoModule, 0});
    out.add(Frame{s.lock->lock, FrameKind::Lock, kNoModule, 0});
  }
  if (s.waker)
    add_waker(*s.waker, out);
  if (shows_lock_owner(s))
    out.add(annotation("[owner " + s.lock->owner_comm + "]"));
}

} // namespace

const char *waker_marker(Waker::Kind kind) {
  switch (kind) {
  case Waker::Kind::Task:
    break;
  case Waker::Kind::Timer:
    return "[timer]";
  case Waker::Kind::Interrupt:
    return "[interrupt]";
  case Waker::Kind::Unseen:
    return "[no waker]";
  case Waker::Kind::Preempted:
    return "[preempted]";
  case Waker::Kind::TooShort:
    return "[waker not recorded]";
  case Waker::Kind::Lost:
    return "[waker lost]";
  case Waker::Kind::Waiting:
    return "[still waiting]";
  }
  return "[waker]";
}

// The owner at the begin is news only where it is not the waker (the lock
// changed hands meanwhile, or the wakeup came from elsewhere).
bool shows_lock_owner(const Sample &s) {
  return s.lock && s.lock->owner_tid &&
         !(s.waker && s.waker->kind == Waker::Kind::Task &&
           s.waker->tid == s.lock->owner_tid);
}

std::string thread_frame_name(const Sample &s, ThreadFrame how) {
  switch (how) {
  case ThreadFrame::Comm:
    break;
  case ThreadFrame::Process:
    return s.comm + "-" + std::to_string(s.tgid);
  case ThreadFrame::Thread:
    return s.comm + "-" + std::to_string(s.tgid) + "/" + std::to_string(s.tid);
  }
  return s.comm;
}

std::vector<Frame> lay_out(const Sample &s, const LayoutOptions &opts) {
  std::vector<const Frame *> refs;
  std::deque<Frame> own;
  LineOut line(refs, own);
  lay_out_into(s, opts, line);
  std::vector<Frame> out;
  out.reserve(refs.size());
  for (const Frame *f : refs)
    out.push_back(*f);
  return out;
}

LaidOutParts lay_out_parts(const Sample &s, const LayoutOptions &opts) {
  LaidOutParts out;
  std::vector<const Frame *> frames;
  LineOut line(frames, out.own);
  lay_out_into(s, opts, line);
  const uint64_t runq = std::min(s.runq_ns, s.total_ns);
  if (runq == 0) {
    out.parts.push_back({std::move(frames), s.total_ns});
    return out;
  }
  std::vector<const Frame *> runnable = frames;
  auto waker =
      std::find_if(runnable.begin(), runnable.end(), [](const Frame *f) {
        return f->kind == FrameKind::WakerDelimiter;
      });
  out.own.push_back(annotation("[runqueue]"));
  runnable.insert(waker, &out.own.back());
  if (runq < s.total_ns)
    out.parts.push_back({std::move(frames), s.total_ns - runq});
  out.parts.push_back({std::move(runnable), runq});
  return out;
}

} // namespace offcpu
