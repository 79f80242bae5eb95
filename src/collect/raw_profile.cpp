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

namespace {

bool is_deep(uint64_t id) {
  return id & OFFCPU_STACK_DEEP;
}

// The map's value holds at most `Max` frames (a short stack's or a deep
// one's).
template <size_t Max> struct StoredStack {
  uint32_t nr;
  uint32_t flags;
  uint64_t ips[Max];
};
static_assert(sizeof(StoredStack<OFFCPU_SHORT_STACK_DEPTH>) ==
              sizeof(offcpu_short_stack));
static_assert(sizeof(StoredStack<OFFCPU_MAX_STACK_DEPTH>) ==
              sizeof(offcpu_stack));

template <size_t Max>
void keep(StackTable &out, uint64_t id, const StoredStack<Max> &stack) {
  const uint32_t nr = std::min<uint32_t>(stack.nr, Max);
  out.emplace(id, std::vector<uint64_t>(stack.ips, stack.ips + nr));
  if (stack.flags & OFFCPU_STACK_TRUNCATED)
    out.truncated.insert(id);
}

// The stacks of one map among `wanted`.
template <size_t Max>
void read_map(int fd, const std::unordered_set<uint64_t> &wanted, size_t in_map,
              StackTable &out) {
  // Most of the map wanted (the end of a run): read it in batches rather
  // than a system call per stack.
  if (in_map >= kBatchedFrom) {
    for_each_entry<uint64_t, StoredStack<Max>>(
        fd,
        [&](uint64_t id, const StoredStack<Max> &stack) {
          if (wanted.count(id))
            keep(out, id, stack);
        },
        kStacksPerBatch);
    return;
  }
  StoredStack<Max> stack{};
  for (uint64_t id : wanted)
    if (is_deep(id) == (Max == OFFCPU_MAX_STACK_DEPTH) &&
        bpf_map_lookup_elem(fd, &id, &stack) == 0)
      keep(out, id, stack);
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
    read_map<OFFCPU_SHORT_STACK_DEPTH>(maps.short_fd, wanted,
                                       wanted.size() - deep, out);
  if (deep)
    read_map<OFFCPU_MAX_STACK_DEPTH>(maps.deep_fd, wanted, deep, out);
}

std::vector<uint64_t> read_stack(const StackMaps &maps, uint64_t id) {
  offcpu_stack stack{}; // either map's value fits
  if (id < OFFCPU_STACK_FIRST_ID ||
      bpf_map_lookup_elem(is_deep(id) ? maps.deep_fd : maps.short_fd, &id,
                          &stack) != 0)
    return {};
  const uint32_t max =
      is_deep(id) ? OFFCPU_MAX_STACK_DEPTH : OFFCPU_SHORT_STACK_DEPTH;
  return std::vector<uint64_t>(stack.ips, stack.ips + std::min(stack.nr, max));
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
