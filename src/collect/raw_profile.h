// What the BPF side collected, copied out of its maps, before symbolization.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "offcpu/shared.h"
#include "util/chunks.h"

namespace offcpu {

// Stack id -> instruction pointers, leaf first; and the ids of the stacks
// cut at the depth limit (OFFCPU_STACK_TRUNCATED), whose root-side frames
// are missing. A map with that one set beside it: every reader of frames
// stays as it was.
struct StackTable : std::unordered_map<uint64_t, std::vector<uint64_t>> {
  std::unordered_set<uint64_t> truncated;
};

// The two maps a BPF object stores stacks in: `stacks` for the short ones,
// `deep_stacks` (ids with OFFCPU_STACK_DEEP) for those over
// OFFCPU_SHORT_STACK_DEPTH frames; see stack_store.bpf.h.
struct StackMaps {
  int short_fd = -1;
  int deep_fd = -1;
};

// Copies the stacks with these ids out of their maps.
void read_stacks(const StackMaps &maps, const std::vector<uint64_t> &ids,
                 StackTable &out);

// One stack's frames, leaf first; empty if it is not stored.
std::vector<uint64_t> read_stack(const StackMaps &maps, uint64_t id);

// The addresses in the kernel stacks of `counts` (which the stack store
// keeps apart from user stacks only by the keys that refer to them), each
// once, sorted: many keys share a stack, and a whole-system run's copy per
// key was tens of MiB at the end (issue #27).
template <typename Entries>
std::vector<uint64_t> kernel_addresses(const Entries &counts,
                                       const StackTable &stacks) {
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> out;
  for (const auto &kv : counts) {
    if (!seen.insert(kv.first.kernel_stack).second)
      continue;
    auto it = stacks.find(kv.first.kernel_stack);
    if (it != stacks.end())
      out.insert(out.end(), it->second.begin(), it->second.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The stacks of `counts` cut at the depth limit, and the waits on them.
struct TruncatedStacks {
  size_t stacks = 0;
  uint64_t waits = 0;
};
template <typename Entries>
TruncatedStacks truncated_stacks(const Entries &counts,
                                 const StackTable &stacks) {
  TruncatedStacks t;
  if (stacks.truncated.empty())
    return t;
  std::unordered_set<uint64_t> seen;
  for (const auto &kv : counts) {
    bool cut = false;
    for (uint64_t id : {kv.first.user_stack, kv.first.kernel_stack})
      if (stacks.truncated.count(id)) {
        cut = true;
        t.stacks += seen.insert(id).second;
      }
    if (cut)
      t.waits += kv.second.count;
  }
  return t;
}

// The aggregation map's entries with waits, then the overflow map's.
// Chunked: naming frees them as it makes the samples (add_offcpu_samples),
// where a whole-system run's entries and samples were both whole at the
// peak (issue #27).
using CountEntries = Chunks<std::pair<offcpu_key, offcpu_value>>;

struct RawProfile {
  CountEntries counts;
  StackTable stacks;
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  // The off-CPU time the losses carried, where it is known (0 if not).
  std::array<uint64_t, OFFCPU_LOST_NR> lost_ns{};
  std::array<uint64_t, OFFCPU_KUNWIND_NR> kunwind{}; // kernel-stack walker
  // Context switches the kernel did not run the hook for (its per-CPU
  // recursion guard); each may have lost a wait.
  uint64_t missed_switches = 0;
  // Switch-ins the kernel did not report, whose waits were ended from its
  // scheduler accounting (see end_unseen_wait in bpf/offcpu.bpf.c).
  uint64_t unseen_switch_ins = 0;
  // Waits kept in the hash map because their thread's task storage could
  // not be created then (bpf/wait_state.bpf.h, spill_start): not lost.
  uint64_t starts_spilled = 0;
  // Off-CPU time by the state class the waits began in.
  std::array<uint64_t, OFFCPU_STATE_NR> state_ns{};
  // --wakers: the wakers the keys refer to (their stacks are in `stacks`).
  std::unordered_map<uint64_t, offcpu_waker> wakers;
  uint64_t window_ns = 0;
};

// What offcpu rwsem's programs collected over one interval.
struct RawLockWaits {
  std::vector<std::pair<rwsem_key, rwsem_value>> waits;
  StackTable stacks;
  std::array<uint64_t, OFFCPU_LOST_NR> lost{};
  std::unordered_map<uint64_t, offcpu_waker> wakers; // --wakers
  // Wakers were walked (--wakers); else futex waits' holders are names only.
  bool holder_stacks = false;
  // rwsem_key.cache -> the slab cache's name (offcpu lock, 6.12+).
  std::unordered_map<uint64_t, std::string> slab_caches;
  // rwsem_key.cgroup -> its label (--by cgroup), filled by whoever reports.
  std::unordered_map<uint64_t, std::string> cgroups;
};

// Reads the wakers `ids` refer to from a wakers map into `out`, and the
// ids of their stacks into `stack_ids`.
void read_wakers(int wakers_map_fd, const std::vector<uint64_t> &ids,
                 std::unordered_map<uint64_t, offcpu_waker> &out,
                 std::vector<uint64_t> &stack_ids);

} // namespace offcpu
