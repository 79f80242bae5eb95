#include "model/layout.h"

namespace offcpu {

uint32_t Profile::module(const std::string &path, const std::string &build_id) {
  auto it = module_index_.find(path);
  if (it != module_index_.end())
    return it->second;
  uint32_t index = static_cast<uint32_t>(modules.size());
  modules.push_back({path, build_id});
  module_index_.emplace(path, index);
  return index;
}

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
