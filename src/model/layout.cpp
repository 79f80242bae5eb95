#include "model/layout.h"

namespace offcpu {

std::vector<Frame> lay_out(const Sample &s, const LayoutOptions &opts) {
  std::vector<Frame> out;
  out.reserve(s.user.size() + s.kernel.size() + 3);
  out.push_back({s.comm, FrameKind::Thread, kNoModule, 0});
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
  return out;
}

} // namespace offcpu
