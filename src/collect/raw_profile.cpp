#include "collect/raw_profile.h"

#include <bpf/bpf.h>

#include <algorithm>

namespace offcpu {

void read_stacks(int stacks_map_fd, const std::vector<uint64_t> &ids,
                 StackTable &out) {
  offcpu_stack stack{};
  for (uint64_t id : ids) {
    if (id < OFFCPU_STACK_FIRST_ID || out.count(id))
      continue;
    if (bpf_map_lookup_elem(stacks_map_fd, &id, &stack) != 0)
      continue;
    uint32_t nr = std::min<uint32_t>(stack.nr, OFFCPU_MAX_STACK_DEPTH);
    out.emplace(id, std::vector<uint64_t>(stack.ips, stack.ips + nr));
    if (stack.flags & OFFCPU_STACK_TRUNCATED)
      out.truncated.insert(id);
  }
}

void read_wakers(int wakers_map_fd, const std::vector<uint64_t> &ids,
                 std::unordered_map<uint64_t, offcpu_waker> &out,
                 std::vector<uint64_t> &stack_ids) {
  for (uint64_t id : ids) {
    offcpu_waker w{};
    if (id < OFFCPU_WAKER_FIRST_ID || out.count(id) ||
        bpf_map_lookup_elem(wakers_map_fd, &id, &w) != 0)
      continue;
    out.emplace(id, w);
    stack_ids.push_back(w.user_stack);
    stack_ids.push_back(w.kernel_stack);
  }
}

} // namespace offcpu
