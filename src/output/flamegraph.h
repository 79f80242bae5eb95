// A self-contained, interactive SVG flame graph, in the style users know
// from flamegraph.pl: one box per frame, width proportional to time, callers
// below callees; click to zoom, search with highlighting, tooltips with value
// and share. Works offline (no external resources).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/layout.h"
#include "model/profile.h"
#include "model/stack_tree.h"

namespace offcpu {

struct FlameFrame {
  std::string name;
  FrameKind kind = FrameKind::User; // colours: thread, user, kernel, marker
  bool inlined = false;             // said in its tooltip
};

struct FlameStack {
  std::vector<FlameFrame> frames; // root first
  double value = 0;
  Latency latency; // its waits' lengths, if known (shown in the tooltips)
};

struct FlameGraphOptions {
  std::string title = "Off-CPU Time Flame Graph";
  std::string count_name = "us";
  int width = 1200;
  double min_width = 0.1; // pixels; narrower frames are left out
};

// The model's samples as stacks in microseconds (the frames of lay_out).
std::vector<FlameStack> flame_stacks(const Profile &profile,
                                     const LayoutOptions &layout);

std::string render_flamegraph(const std::vector<FlameStack> &stacks,
                              const FlameGraphOptions &opts);
// The same from stacks already merged (offcpu flamegraph's input); with
// `leaf_latency`, the lengths of the waits of the stacks ending at each
// node, merged up the tree into each drawn frame's tooltip.
std::string render_flamegraph(
    const StackTree &tree, const FlameGraphOptions &opts,
    const std::unordered_map<uint32_t, Latency> *leaf_latency = nullptr);

// Escapes text for SVG/XML content and attribute values.
std::string xml_escape(std::string_view s);

} // namespace offcpu
