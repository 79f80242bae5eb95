#include "unwind/layout_gens.h"

#include <cstring>

namespace offcpu {

std::optional<uint32_t> LayoutGens::gen_for(const uw_mapping *maps, size_t n) {
  const auto *bytes = reinterpret_cast<const unsigned char *>(maps);
  const size_t size = n * sizeof(uw_mapping);
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (size_t i = 0; i < size; i++)
    h = (h ^ bytes[i]) * 1099511628211ull;
  // Compared whole, not trusted to the hash: a process whose mappings an
  // unprivileged user arranges must not share another's cached rules.
  auto [first, last] = by_hash_.equal_range(h);
  for (auto it = first; it != last; ++it)
    if (it->second.maps.size() == n &&
        std::memcmp(it->second.maps.data(), maps, size) == 0)
      return it->second.gen;
  if (last_ + 1 >= UW_GEN_LIMIT)
    return std::nullopt;
  const size_t cost = size + sizeof(Layout) + 32; // the node, roughly
  if (bytes_ + cost > max_bytes_) {
    by_hash_.clear();
    bytes_ = 0;
  }
  by_hash_.emplace(h, Layout{++last_, std::vector<uw_mapping>(maps, maps + n)});
  bytes_ += cost;
  return last_;
}

} // namespace offcpu
