// Folded stacks, as BCC's offcputime -f prints them and flamegraph.pl reads:
//   comm;user_root;...;user_leaf;kernel_root;...;kernel_leaf microseconds
// Written from the model, and read back as flame graph input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/layout.h"
#include "model/profile.h"
#include "output/flamegraph.h"

namespace offcpu {

// Lines with identical text are merged; largest first, ties by text. Lines
// that round to 0 us are dropped.
std::string render_folded(const Profile &profile, const LayoutOptions &layout);

// Makes a frame or comm safe for one folded field: no ';', no line breaks.
std::string folded_safe(const std::string &name);

// Folded lines ("a;b;c 123", as offcpu, BCC or stackcollapse-perf write
// them) as a model of kind Folded: the first frame is the thread; kernel
// frames are those marked "_[k]" (perf) or after a "-" frame (-d). Lines
// that do not parse are counted in *bad_lines.
Profile read_folded(std::string_view text, size_t *bad_lines,
                    const std::string &unit = "us");

// read_folded's stacks as the flame graph draws them (tests, fuzzing).
std::vector<FlameStack> parse_folded_stacks(std::string_view text,
                                            size_t *bad_lines);

} // namespace offcpu
