#include "collect/raw_profile.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <type_traits>

#include "collect/bpf_util.h"

namespace offcpu {
namespace {

// Stacks wanted from which the whole map is read in batches, and the
// stacks a batch (a kilobyte each).
constexpr size_t kBatchedFrom = 256;
constexpr uint32_t kStacksPerBatch = 256;

bool is_deep(uint64_t id) {
  return id & OFFCPU_STACK_DEEP;
}

// The frames a map's value (struct offcpu_short_stack or offcpu_stack)
// holds.
template <class Stack> constexpr uint32_t max_frames() {
  return sizeof(Stack::ips) / sizeof(Stack::ips[0]);
}

template <class Stack> std::vector<uint64_t> frames_of(const Stack &stack) {
  return {stack.ips,
          stack.ips + std::min<uint32_t>(stack.nr, max_frames<Stack>())};
}

// The stacks of `wanted` in one map (`in_map` of them), its value type
// `Stack`.
template <class Stack>
void read_map(int fd, const std::unordered_set<uint64_t> &wanted, size_t in_map,
              StackTable &out) {
  constexpr bool deep = std::is_same_v<Stack, offcpu_stack>;
  auto keep = [&out](uint64_t id, const Stack &stack) {
    out.emplace(id, frames_of(stack));
    if (stack.flags & OFFCPU_STACK_TRUNCATED)
      out.truncated.insert(id);
  };
  // Most of the map wanted (the end of a run): read it in batches rather
  // than a system call per stack.
  if (in_map >= kBatchedFrom) {
    for_each_entry<uint64_t, Stack>(
        fd,
        [&](uint64_t id, const Stack &stack) {
          if (wanted.count(id))
            keep(id, stack);
        },
        kStacksPerBatch);
    return;
  }
  Stack stack{};
  for (uint64_t id : wanted)
    if (is_deep(id) == deep && bpf_map_lookup_elem(fd, &id, &stack) == 0)
      keep(id, stack);
}

} // namespace

void read_stacks(const StackMaps &maps, const std::vector<uint64_t> &ids,
                 StackTable &out) {
  std::unordered_set<uint64_t> wanted;
  size_t deep = 0;
  for (uint64_t id : ids)
    if (id >= OFFCPU_STACK_FIRST_ID && !out.count(id) &&
        wanted.insert(id).second)
      deep += is_deep(id);
  if (wanted.size() > deep)
    read_map<offcpu_short_stack>(maps.short_fd, wanted, wanted.size() - deep,
                                 out);
  if (deep)
    read_map<offcpu_stack>(maps.deep_fd, wanted, deep, out);
}

std::vector<uint64_t> read_stack(const StackMaps &maps, uint64_t id) {
  if (id < OFFCPU_STACK_FIRST_ID)
    return {};
  if (is_deep(id)) {
    offcpu_stack stack{};
    return bpf_map_lookup_elem(maps.deep_fd, &id, &stack) == 0
               ? frames_of(stack)
               : std::vector<uint64_t>{};
  }
  offcpu_short_stack stack{};
  return bpf_map_lookup_elem(maps.short_fd, &id, &stack) == 0
             ? frames_of(stack)
             : std::vector<uint64_t>{};
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
