#include "collect/raw_profile.h"

#include <bpf/bpf.h>

#include <algorithm>

#include "collect/bpf_util.h"

namespace offcpu {
namespace {

// Stacks wanted from which the whole map is read in batches, and the
// stacks a batch (a kilobyte each).
constexpr size_t kBatchedFrom = 256;
constexpr uint32_t kStacksPerBatch = 256;

} // namespace

void read_stacks(int stacks_map_fd, const std::vector<uint64_t> &ids,
                 StackTable &out) {
  auto keep = [&out](uint64_t id, const offcpu_stack &stack) {
    uint32_t nr = std::min<uint32_t>(stack.nr, OFFCPU_MAX_STACK_DEPTH);
    out.emplace(id, std::vector<uint64_t>(stack.ips, stack.ips + nr));
    if (stack.flags & OFFCPU_STACK_TRUNCATED)
      out.truncated.insert(id);
  };
  std::unordered_set<uint64_t> wanted;
  for (uint64_t id : ids)
    if (id >= OFFCPU_STACK_FIRST_ID && !out.count(id))
      wanted.insert(id);
  // Most of the map wanted (the end of a run): read it in batches rather
  // than a system call per stack.
  if (wanted.size() >= kBatchedFrom) {
    for_each_entry<uint64_t, offcpu_stack>(
        stacks_map_fd,
        [&](uint64_t id, const offcpu_stack &stack) {
          if (wanted.count(id))
            keep(id, stack);
        },
        kStacksPerBatch);
    return;
  }
  offcpu_stack stack{};
  for (uint64_t id : wanted)
    if (bpf_map_lookup_elem(stacks_map_fd, &id, &stack) == 0)
      keep(id, stack);
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
