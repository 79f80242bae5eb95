#include "collect/raw_profile.h"

#include <bpf/bpf.h>

#include <algorithm>

namespace offcpu {

void read_stacks(int stacks_map_fd, const std::vector<uint64_t> &ids,
                 StackTable &out) {
  offcpu_stack stack{};
  for (uint64_t id : ids) {
    if (id == OFFCPU_NO_STACK || id == OFFCPU_STACK_MISSED || out.count(id))
      continue;
    if (bpf_map_lookup_elem(stacks_map_fd, &id, &stack) != 0)
      continue;
    uint32_t nr = std::min<uint32_t>(stack.nr, OFFCPU_MAX_STACK_DEPTH);
    out.emplace(id, std::vector<uint64_t>(stack.ips, stack.ips + nr));
  }
}

} // namespace offcpu
