#include "model/timeline.h"

#include <cstring>

#include "model/layout.h"

namespace offcpu {
namespace {

// Unnamed user code: "[module]", "file+0x1234", "[unknown]".
bool named(const Frame &f) {
  return !f.name.empty() && f.name[0] != '[' &&
         f.name.find("+0x") == std::string::npos;
}

// The scheduler's own functions, where every wait ends: the interesting
// kernel frame is the one that called into them.
bool scheduler_frame(const std::string &name) {
  static const char *const names[] = {"__schedule",
                                      "schedule",
                                      "schedule_preempt_disabled",
                                      "preempt_schedule_common",
                                      "schedule_timeout",
                                      "__cond_resched"};
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

} // namespace

std::string wait_name(const TimelineStack &stack, const std::string &comm) {
  const std::vector<Frame> &user = stack.user, &kernel = stack.kernel;
  // As the stack names it: joined_frames of the one frame.
  for (auto it = user.rbegin(); it != user.rend(); ++it)
    if (it->kind == FrameKind::User && named(*it))
      return joined_frames({*it});
  for (auto it = kernel.rbegin(); it != kernel.rend(); ++it)
    if (it->kind == FrameKind::Kernel && !scheduler_frame(it->name) &&
        named(*it))
      return joined_frames({*it});
  return comm;
}

std::string joined_frames(const std::vector<Frame> &frames) {
  std::string out;
  for (const Frame &f : frames) {
    if (!out.empty())
      out += ';';
    for (char c : f.name)
      out += c == ';' ? ':' : c;
  }
  return out;
}

std::string joined_stack(const TimelineStack &stack) {
  std::string u = joined_frames(stack.user), k = joined_frames(stack.kernel);
  return u.empty() ? k : k.empty() ? u : u + ";" + k;
}

std::string waker_label(const TimelineWaker &w) {
  if (w.kind != Waker::Kind::Task)
    return waker_marker(w.kind);
  return w.comm + "-" + std::to_string(w.tid);
}

} // namespace offcpu
