#include "model/profile.h"

#include <unordered_map>

namespace offcpu {

uint32_t Profile::module(const std::string &path, const std::string &build_id,
                         const std::string &debug_file) {
  auto key = std::make_pair(path, build_id);
  auto it = module_index_.find(key);
  if (it != module_index_.end()) {
    Module &m = modules[it->second];
    if (m.debug_file.empty())
      m.debug_file = debug_file;
    return it->second;
  }
  uint32_t index = static_cast<uint32_t>(modules.size());
  modules.push_back({path, build_id, debug_file});
  module_index_.emplace(std::move(key), index);
  return index;
}

void Profile::append(const Profile &other) {
  std::vector<uint32_t> modules_to, mappings_to;
  for (const Module &m : other.modules)
    modules_to.push_back(module(m.path, m.build_id, m.debug_file));
  for (MappedRange r : other.mappings) {
    r.module = r.module < modules_to.size() ? modules_to[r.module] : kNoModule;
    mappings_to.push_back(mapping(r));
  }
  // Frames the other profile's samples share stay shared: each list and
  // each frame renumbered once.
  std::unordered_map<const void *, Frames> renumbered;
  std::unordered_map<const Frame *, Frames::Item> renumbered_frames;
  auto renumber = [&](Frames &frames) {
    if (frames.empty())
      return;
    auto [it, fresh] = renumbered.try_emplace(frames.identity());
    if (!fresh) {
      frames = it->second;
      return;
    }
    Frames::Items items;
    items.reserve(frames.size());
    for (const Frames::Item &old : frames.items()) {
      Frames::Item &to = renumbered_frames[old.get()];
      if (!to) {
        Frame f = *old;
        f.module =
            f.module < modules_to.size() ? modules_to[f.module] : kNoModule;
        f.mapping = f.mapping < mappings_to.size() ? mappings_to[f.mapping]
                                                   : kNoMapping;
        to = std::make_shared<const Frame>(std::move(f));
      }
      items.push_back(to);
    }
    frames = Frames(std::move(items));
    it->second = frames;
  };
  for (Sample s : other.samples) {
    renumber(s.user);
    renumber(s.kernel);
    samples.push_back(std::move(s));
  }
}

uint32_t Profile::mapping(const MappedRange &range) {
  auto it = mapping_index_.find(range);
  if (it != mapping_index_.end())
    return it->second;
  uint32_t index = static_cast<uint32_t>(mappings.size());
  mappings.push_back(range);
  mapping_index_.emplace(range, index);
  return index;
}

} // namespace offcpu
