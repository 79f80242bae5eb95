// `offcpu flamegraph [FILE]`: folded stacks in, interactive SVG out.
#pragma once

#include "cli/options.h"

namespace offcpu {

int run_flamegraph(const FlamegraphOptions &opts);

} // namespace offcpu
