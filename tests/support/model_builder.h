// Model samples for the output tests, written briefly.
#pragma once

#include <string>
#include <vector>

#include "model/profile.h"

namespace offcpu::test {

inline std::vector<Frame> frames(const std::vector<std::string> &names,
                                 FrameKind kind) {
  std::vector<Frame> out;
  for (const std::string &n : names)
    out.push_back({n, kind, kNoModule, 0});
  return out;
}

inline Sample sample(std::string comm, const std::vector<std::string> &user,
                     const std::vector<std::string> &kernel, uint64_t ns,
                     uint32_t tid = 0, uint64_t count = 1) {
  Sample s;
  s.comm = std::move(comm);
  s.tid = tid;
  s.user = frames(user, FrameKind::User);
  s.kernel = frames(kernel, FrameKind::Kernel);
  s.total_ns = ns;
  s.count = count;
  return s;
}

inline Profile profile(std::vector<Sample> samples,
                       ProfileKind kind = ProfileKind::OffCpu) {
  Profile p;
  p.kind = kind;
  p.samples = std::move(samples);
  return p;
}

template <typename FrameList>
std::vector<std::string> names(const FrameList &fs) {
  std::vector<std::string> out;
  for (const Frame &f : fs)
    out.push_back(f.name);
  return out;
}

} // namespace offcpu::test
