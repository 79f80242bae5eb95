// `offcpu flamegraph [FILE]`: folded stacks in; interactive SVG, merged
// folded text or pprof out, each -o in the format its name says.
#pragma once

#include "cli/options.h"

namespace offcpu {

int run_flamegraph(const FlamegraphOptions &opts);

} // namespace offcpu
