// Folded stacks, as BCC's offcputime -f prints them and flamegraph.pl reads:
//   comm;user_root;...;user_leaf;kernel_root;...;kernel_leaf microseconds
// Written from the model, and read back as flame graph input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/layout.h"
#include "model/profile.h"
#include "model/stack_tree.h"
#include "output/flamegraph.h"
#include "output/text_sink.h"

namespace offcpu {

// Lines with identical text are merged; largest first, ties by text. Lines
// that round to 0 us are dropped.
std::string render_folded(const Profile &profile, const LayoutOptions &layout);
// The same through `sink`, a piece at a time; false if the sink stopped it.
bool write_folded(const Profile &profile, const LayoutOptions &layout,
                  const TextSink &sink);

// Makes a frame or comm safe for one folded field: no ';', no line breaks.
std::string folded_safe(const std::string &name);

// Folded lines ("a;b;c 123", as offcpu, BCC or stackcollapse-perf write
// them) as a model of kind Folded: the first frame is the thread; kernel
// frames are those marked "_[k]" (perf) or after a "-" frame (-d). Lines
// that do not parse are counted in *bad_lines.
Profile read_folded(std::string_view text, size_t *bad_lines,
                    const std::string &unit = "us");

// Folded text fed in pieces of any size (a file read in chunks), each
// line merged into a StackTree as soon as it is whole: what is held is the
// merged tree and at most one line, never the text.
class FoldedReader {
public:
  // Longer lines are skipped (and counted): no real stack comes near.
  static constexpr size_t kMaxLine = size_t{1} << 20;

  explicit FoldedReader(StackTree &tree) : tree_(tree) {}
  void feed(std::string_view chunk);
  void finish(); // the last line, if it has no line break

  size_t stacks = 0;            // lines merged into the tree
  size_t bad_lines = 0;         // not of the form "frame;frame;... value"
  size_t long_lines = 0;        // longer than kMaxLine
  size_t over_budget = 0;       // would have taken the tree past its budget
  double over_budget_value = 0; // their values, in the input's unit

private:
  void line(std::string_view line);

  StackTree &tree_;
  std::string carry_;     // a line begun in an earlier chunk
  bool skipping_ = false; // inside a line too long to keep
  std::vector<std::string> names_;
  std::vector<StackTree::FrameRef> refs_;
};

// A tree's stacks as merged folded text, as render_folded writes a model
// read from folded text.
std::string render_folded(const StackTree &tree);

// A tree's stacks as a model of kind Folded (one sample per distinct
// stack, its count the lines merged), for the formats drawn from a model.
Profile folded_profile(const StackTree &tree, const std::string &unit);

// read_folded's stacks as the flame graph draws them (tests, fuzzing).
std::vector<FlameStack> parse_folded_stacks(std::string_view text,
                                            size_t *bad_lines);

} // namespace offcpu
