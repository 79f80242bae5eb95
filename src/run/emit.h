// Renders samples in the chosen format and writes them where asked.
#pragma once

#include <string>
#include <vector>

#include "cli/options.h"
#include "collect/sample.h"
#include "output/pprof.h"

namespace offcpu {

// The bytes of folded, SVG or pprof output (text is the caller's own).
std::string render_samples(const std::vector<Sample> &samples,
                           const OutputOptions &out,
                           const std::string &default_title,
                           const PprofOptions &pprof);

// Wall clock now, ns since the epoch (pprof time_nanos).
int64_t wall_clock_ns();

} // namespace offcpu
