// Kernel memory taken by the BPF maps a run sizes from the command line,
// checked against what the machine can spare before anything is loaded: a
// typo in --stack-storage-size must not pin gigabytes of kernel memory.
#pragma once

#include <cstdint>
#include <string>

#include "util/fs.h"

namespace offcpu {

struct MapDemand {
  uint32_t stacks = 0;           // --stack-storage-size
  uint32_t aggregation = 0;      // --max-entries
  uint64_t aggregation_item = 0; // bytes of one aggregation key + value
};

// Entries of the map of deep stacks (over OFFCPU_SHORT_STACK_DEPTH frames)
// beside `stacks` entries of the short ones (--stack-storage-size): a
// quarter, at least 64 (or `stacks` if less).
uint32_t deep_stack_storage(uint32_t stacks);

// Preallocated bytes, with the kernel's per-element overhead.
uint64_t map_bytes(const MapDemand &d);

// Throws FatalError (usage) naming the cap and the largest value that fits
// when the maps would take more than an eighth of MemAvailable or 1 GiB.
// Machines whose /proc/meminfo cannot be read get the 1 GiB cap.
void check_map_budget(const MapDemand &d, const FileReader &files);

// What the same cap leaves for the user unwind tables once `d`'s maps are
// counted: their kernel memory is held to it as well as to
// --unwind-memory.
uint64_t map_budget_room(const MapDemand &d, const FileReader &files);

// The default --stack-storage-size and --max-entries, sized from the
// machine: the largest power of two whose maps take at most a twelfth of
// the cap above (so both fit it with room for the unwind tables), between
// a floor a small machine can hold and a ceiling past which preallocating
// the stacks slows start-up for no real run's benefit.
uint32_t default_stack_storage(const FileReader &files);
uint32_t default_max_entries(uint64_t aggregation_item,
                             const FileReader &files);

// Of `size` entries (--stack-storage-size, --max-entries), how many the
// window leaves for the stop pass, which charges the threads still blocked
// at the end, those blocked for the whole window among them, and takes
// their kernel stacks (see window_stack_limit in bpf/stack_store.bpf.h):
// two per thread on the host now, at least an eighth and at most half.
uint32_t stop_pass_reserve(uint32_t size, const FileReader &files);

// How warnings name that cap.
inline constexpr const char *kMapBudgetName =
    "the map budget (an eighth of available memory, at most 1 GiB, less "
    "--stack-storage-size and --max-entries)";

} // namespace offcpu
