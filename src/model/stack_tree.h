// Stacks merged into one tree as they arrive: one node per distinct path
// from the root, frame names interned, children found by (parent, name).
// What `offcpu flamegraph` holds while it reads folded text: its memory
// follows the merged tree, not the input, and is capped.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/profile.h"

namespace offcpu {

class StackTree {
public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kRoot = 0;
  // Frames (and distinct names) at most by default: about 100 bytes each,
  // so under 1 GB however hostile the input.
  static constexpr size_t kDefaultMaxNodes = size_t{1} << 23;
  // A frame deeper than this is not drawn (the SVG is walked recursively):
  // the flame graph cuts the stack there with a [truncated] frame.
  static constexpr size_t kMaxDrawnFrames = 1024;

  struct Node {
    uint32_t name = 0; // index into name()
    uint32_t parent = kNone;
    uint32_t first_child = kNone, next_sibling = kNone; // creation order
    FrameKind kind = FrameKind::User;                   // as first seen
    bool inlined = false; // a function inlined into its parent (as first seen)
    double value = 0;     // every stack through here, in input order
    uint64_t self_ns = 0; // the stacks that end here (thousandths of a unit)
    uint64_t self_count = 0;
  };

  explicit StackTree(size_t max_nodes = kDefaultMaxNodes);

  // One frame of a stack being added, root first. A kernel frame and
  // another of the same name are different nodes.
  struct FrameRef {
    std::string_view name;
    FrameKind kind;
    bool inlined = false; // Frame::inlined
  };
  // Adds one stack (the first frame is the thread). False, with nothing
  // added, if it would take the tree past its node budget.
  bool add(const std::vector<FrameRef> &frames, double value, uint64_t ns);
  // The node of the last frame of the stack add() last took.
  uint32_t last_leaf() const { return path_.empty() ? kRoot : path_.back(); }

  const Node &node(uint32_t i) const { return nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  const std::string &name(uint32_t id) const { return names_[id]; }
  // Of the stacks through node i, those longer than kMaxDrawnFrames whose
  // frame kMaxDrawnFrames - 1 is under i: their value in input order
  // (drawn as one [truncated] child), or 0.
  double truncated_value(uint32_t i) const;

private:
  // Open addressing: (parent, name id, kernel bit) -> node.
  struct Slot {
    uint64_t key = 0;
    uint32_t node = kNone;
  };
  static uint64_t key(uint32_t parent, uint32_t name, bool kernel) {
    return uint64_t{parent} << 32 | uint64_t{name} << 1 | (kernel ? 1 : 0);
  }
  uint32_t find(uint64_t k) const;
  void insert(uint64_t k, uint32_t node);
  void grow();
  // The id of `name`, interned; kNone if the budget has no room.
  uint32_t intern(std::string_view name);

  size_t max_nodes_;
  std::vector<Node> nodes_;
  std::vector<Slot> slots_; // a power of two, at most half full
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, uint32_t> name_ids_;
  std::unordered_map<uint32_t, double> truncated_;
  std::vector<uint32_t> path_; // reused by add()
};

} // namespace offcpu
