// What the BPF side collected, copied out of its maps, before symbolization.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "offcpu/shared.h"

namespace offcpu {

// Stack id -> instruction pointers, leaf first.
using StackTable = std::unordered_map<uint64_t, std::vector<uint64_t>>;

// Copies the stacks with these ids out of a stacks map (see stack_store.bpf.h).
void read_stacks(int stacks_map_fd, const std::vector<uint64_t> &ids,
                 StackTable &out);

struct RawProfile {
  std::vector<std::pair<offcpu_key, offcpu_value>> counts;
  StackTable stacks;
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  std::array<uint64_t, OFFCPU_KUNWIND_NR> kunwind{}; // kernel-stack walker
  uint64_t window_ns = 0;
};

} // namespace offcpu
