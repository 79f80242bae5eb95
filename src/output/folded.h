// Folded stacks, as BCC's offcputime -f prints them and flamegraph.pl reads:
//   comm;user_root;...;user_leaf;kernel_root;...;kernel_leaf microseconds
#pragma once

#include <string>
#include <vector>

#include "collect/sample.h"

namespace offcpu {

struct FoldedOptions {
  bool delimited = false; // "-" frame between user and kernel parts
};

// Lines with identical text are merged; largest first, ties by text. Lines
// that round to 0 us are dropped.
std::string format_folded(const std::vector<Sample> &samples,
                          const FoldedOptions &opts);

// Makes a frame or comm safe for one folded field: no ';', no line breaks.
std::string folded_safe(const std::string &name);

} // namespace offcpu
