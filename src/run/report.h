// What a run says on stderr when it ends: every loss, by cause, with the
// option that helps; and with -v how stacks were named.
#pragma once

#include <array>
#include <cstdint>
#include <string>

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
// nothing was lost.
std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries,
                            const LossTime *time = nullptr);

// "(36.0% of off-CPU time, 10500 s)": a loss of `ns` out of `total_ns`.
std::string time_share(uint64_t ns, uint64_t total_ns);

// One line on the stacks cut at the depth limit (`depth`, the
// --perf-max-stack-depth in force) and the waits on them; empty if none.
std::string describe_truncated(size_t stacks, uint64_t waits, uint32_t depth);

// -v: frames named and unnamed, and where the unnamed ones came from.
std::string symbolization_summary(const SymbolizeStats &st);

} // namespace offcpu
