// The off-CPU profile command: options -> plan -> load/attach -> collect ->
// drain -> symbolize -> render -> stdout or files.
#pragma once

#include "cli/options.h"

namespace offcpu {

// Returns the exit code; throws FatalError on errors the user must fix.
int run_profile(const ProfileOptions &opts);

} // namespace offcpu
