// What a run says on stderr when it ends: every loss, by cause, with what
// it cost and the option that helps; and with -v how stacks were named.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "offcpu/shared.h"
#include "symbolize/symbolizer.h"

namespace offcpu {

// The off-CPU time the losses carried, by cause (0 where unknown), and
// the run's whole off-CPU time, lost time included: what a loss cost.
struct LossTime {
  std::array<uint64_t, OFFCPU_LOST_NR> ns{};
  uint64_t total_ns = 0;
  uint32_t stack_reserve = 0; // stacks kept for the stop pass
};

// One line per cause of loss in the BPF programs, naming the option that
// fixes it, with the time it cost where `time` knows it; empty when
// nothing was lost. Causes whose bit is set in `skip` (1 << cause) are
// left out: the summary line covers them.
std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries,
                            const LossTime *time = nullptr, uint32_t skip = 0);

// The causes of loss incomplete_summary() covers (a mask for `skip`).
constexpr uint32_t kSummarizedLosses =
    1u << OFFCPU_LOST_STACK_MAP_FULL | 1u << OFFCPU_LOST_AGG_MAP_FULL |
    1u << OFFCPU_LOST_OVERFLOW_FULL | 1u << OFFCPU_LOST_START_STORE |
    1u << OFFCPU_LOST_USER_STACK_WALK | 1u << OFFCPU_LOST_KERNEL_STACK_WALK |
    1u << OFFCPU_LOST_HELD | 1u << OFFCPU_LOST_ANNOUNCE;

// Off-CPU time on stacks that are not whole, or lost, by cause; each wait
// in one cause only (the first below that applies), but for `partial`,
// which may overlap the others.
struct IncompleteStacks {
  uint64_t total_ns = 0; // every wait's, those lost included
  // Walked, but the stack storage was full: [Missed ... Stack].
  uint64_t full_ns = 0, full_stacks = 0;
  // Found the aggregation map full: kept in their process's bucket,
  // without stacks.
  uint64_t overflow_ns = 0, overflow_waits = 0;
  // Lost with their time: both the map and the overflow full; a thread
  // gone without a last switch-out seen.
  uint64_t lost_ns = 0, lost_waits = 0;
  uint64_t held_ns = 0, held_waits = 0;
  uint64_t no_user_ns = 0, no_user_waits = 0;     // walk found no frame
  uint64_t no_kernel_ns = 0, no_kernel_waits = 0; // likewise
  uint64_t no_stack_ns = 0; // either of the two (0: their sum is used)
  // Walked before their process's unwind tables (frame pointers only) and
  // charged before a walk with them.
  uint64_t partial_ns = 0, partial_waits = 0;
  // Lost without a time to show (context switches the kernel did not
  // report...), each "N what".
  std::vector<std::string> events;
  // The limits in force, for the advice.
  uint32_t stack_storage_size = 0, max_entries = 0;
};

// The one line a run prints by default about what it could not record
// whole: the share of off-CPU time affected, by cause, each with the
// option that helps where one does; empty when nothing was. A warning
// from 1% of the time on (or when an option helps), a note below.
std::string incomplete_summary(const IncompleteStacks &s);

// The --stack-storage-size to advise after `size` filled up.
uint64_t more_stack_storage(uint32_t size);

// "(36.0% of off-CPU time, 10500 s)": a loss of `ns` out of `total_ns`.
std::string time_share(uint64_t ns, uint64_t total_ns);

// One line on the stacks cut at the depth limit (`depth`, the
// --perf-max-stack-depth in force) and the waits on them; empty if none.
std::string describe_truncated(size_t stacks, uint64_t waits, uint32_t depth);

// -v: frames named and unnamed, and where the unnamed ones came from.
std::string symbolization_summary(const SymbolizeStats &st);

} // namespace offcpu
