#include "model/profile.h"

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
