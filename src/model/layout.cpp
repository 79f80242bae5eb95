#include "model/layout.h"

namespace offcpu {

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
  out.reserve(s.user.size() + s.kernel.size() + 5);
  out.push_back(
      {thread_frame_name(s, opts.thread), FrameKind::Thread, kNoModule, 0});
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
    out.push_back(
        {s.lock->write ? "write" : "read", FrameKind::Lock, kNoModule, 0});
    out.push_back({s.lock->lock, FrameKind::Lock, kNoModule, 0});
  }
  return out;
}

} // namespace offcpu
