// A self-contained, interactive SVG flame graph, in the style users know
// from flamegraph.pl: one box per frame, width proportional to time, callers
// below callees; click to zoom, search with highlighting, tooltips with value
// and share. Works offline (no external resources).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "collect/sample.h"

namespace offcpu {

struct FoldedStack {
  std::vector<std::string> frames; // root first; may carry _[k] suffixes
  double value = 0;
};

struct FlameGraphOptions {
  std::string title = "Off-CPU Time Flame Graph";
  std::string count_name = "us";
  int width = 1200;
  double min_width = 0.1; // pixels; narrower frames are left out
};

// Folded lines ("a;b;c 123", as offcpu, BCC or stackcollapse-perf write
// them). Lines that do not parse are counted in *bad_lines and skipped.
std::vector<FoldedStack> parse_folded_stacks(std::string_view text,
                                             size_t *bad_lines);

// Samples as folded stacks in microseconds, kernel frames marked "_[k]" so
// they are drawn in their own color.
std::vector<FoldedStack> stacks_from_samples(const std::vector<Sample> &samples,
                                             bool delimited);

std::string render_flamegraph(const std::vector<FoldedStack> &stacks,
                              const FlameGraphOptions &opts);

// Escapes text for SVG/XML content and attribute values.
std::string xml_escape(std::string_view s);

} // namespace offcpu
