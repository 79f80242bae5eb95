// What the BPF side collected, copied out of its maps, before symbolization.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "offcpu/shared.h"

namespace offcpu {

struct RawProfile {
  std::vector<std::pair<offcpu_key, offcpu_value>> counts;
  // Stack id -> instruction pointers, leaf first.
  std::unordered_map<uint64_t, std::vector<uint64_t>> stacks;
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  uint64_t window_ns = 0;
};

} // namespace offcpu
