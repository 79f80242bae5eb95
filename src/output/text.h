// The human-readable report, laid out like BCC's offcputime: per stack the
// kernel frames leaf first, then the user frames leaf first, the thread, and
// its total off-CPU time in microseconds and how many waits made it up.
// Smallest first, so the largest ends up nearest the prompt.
#pragma once

#include <string>
#include <vector>

#include "collect/sample.h"

namespace offcpu {

struct TextOptions {
  bool delimited = false;
};

std::string format_text(const std::vector<Sample> &samples,
                        const TextOptions &opts);

} // namespace offcpu
