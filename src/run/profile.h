// The off-CPU profile command: options -> plan -> load/attach -> collect ->
// drain -> symbolize -> format -> stdout.
#pragma once

#include "cli/options.h"
#include "collect/raw_profile.h"

namespace offcpu {

// Returns the exit code; throws FatalError on errors the user must fix.
int run_profile(const ProfileOptions &opts);

// One stderr line per cause of loss, naming the option that fixes it.
std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries);

} // namespace offcpu
