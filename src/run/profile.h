// The off-CPU profile command: options -> plan -> load/attach -> collect ->
// drain -> symbolize -> format -> stdout.
#pragma once

#include "cli/options.h"
#include "collect/raw_profile.h"

namespace offcpu {

// Returns the exit code; throws FatalError on errors the user must fix.
int run_profile(const ProfileOptions &opts);

// One stderr line per cause of loss, naming the option that fixes it.
std::string describe_losses(const RawProfile &raw, const ProfileOptions &opts);

} // namespace offcpu
