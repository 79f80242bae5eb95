#include "model/layout.h"

#include <algorithm>

namespace offcpu {
namespace {

Frame annotation(std::string name, FrameKind kind = FrameKind::Annotation) {
  return {std::move(name), kind, kNoModule, 0};
}

// The waker's part: "--", its kernel then user frames leaf first, its comm;
// or the marker of a wakeup without a task.
void add_waker(const Waker &w, std::vector<Frame> &out) {
  out.push_back(annotation("--", FrameKind::WakerDelimiter));
  auto as_waker = [](Frame f) {
    f.kind = FrameKind::Waker;
    return f;
  };
  for (auto it = w.kernel.rbegin(); it != w.kernel.rend(); ++it)
    out.push_back(as_waker(*it));
  if (w.kind != Waker::Kind::Task) {
    out.push_back(annotation(waker_marker(w.kind), FrameKind::Waker));
    return;
  }
  for (auto it = w.user.rbegin(); it != w.user.rend(); ++it)
    out.push_back(as_waker(*it));
  out.push_back(annotation(w.comm, FrameKind::Waker));
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
  std::vector<Frame> out;
  out.reserve(s.user.size() + s.kernel.size() + 6);
  if (!s.cgroup.empty())
    out.push_back({s.cgroup, FrameKind::Group, kNoModule, 0});
  out.push_back(
      {thread_frame_name(s, opts.thread), FrameKind::Thread, kNoModule, 0});
  // The state classes the whole wait: it splits a flame graph's towers
  // right under the thread, as the text report's per-state totals do.
  if (s.state)
    out.push_back(annotation(std::string("[") + s.state + "]"));
  if (s.user_missed)
    out.push_back({"[Missed User Stack]", FrameKind::Marker, kNoModule, 0});
  out.insert(out.end(), s.user.begin(), s.user.end());
  bool has_user = s.user_missed || !s.user.empty();
  bool has_kernel = s.kernel_missed || !s.kernel.empty();
  if (opts.delimited && has_user && has_kernel)
    out.push_back({"-", FrameKind::Delimiter, kNoModule, 0});
  if (s.kernel_missed)
    out.push_back({"[Missed Kernel Stack]", FrameKind::Marker, kNoModule, 0});
  out.insert(out.end(), s.kernel.begin(), s.kernel.end());
  // What was waited for tops the stack: the side, then the lock itself.
  if (s.lock) {
    out.push_back({s.lock->kind_frame(), FrameKind::Lock, kNoModule, 0});
    out.push_back({s.lock->lock, FrameKind::Lock, kNoModule, 0});
  }
  if (s.waker)
    add_waker(*s.waker, out);
  if (shows_lock_owner(s))
    out.push_back(annotation("[owner " + s.lock->owner_comm + "]"));
  return out;
}

std::vector<LaidOutPart> lay_out_parts(const Sample &s,
                                       const LayoutOptions &opts) {
  std::vector<LaidOutPart> parts;
  std::vector<Frame> frames = lay_out(s, opts);
  const uint64_t runq = std::min(s.runq_ns, s.total_ns);
  if (runq == 0) {
    parts.push_back({std::move(frames), s.total_ns});
    return parts;
  }
  std::vector<Frame> runnable = frames;
  auto waker =
      std::find_if(runnable.begin(), runnable.end(), [](const Frame &f) {
        return f.kind == FrameKind::WakerDelimiter;
      });
  runnable.insert(waker, annotation("[runqueue]"));
  if (runq < s.total_ns)
    parts.push_back({std::move(frames), s.total_ns - runq});
  parts.push_back({std::move(runnable), runq});
  return parts;
}

} // namespace offcpu
