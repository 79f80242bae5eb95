#include "model/stack_tree.h"

namespace offcpu {
namespace {

// splitmix64's finalizer: (parent, name) keys are made in patterns (ids
// handed out in order) that a plain multiplicative hash clusters.
size_t slot_of(uint64_t k, size_t mask) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  k ^= k >> 31;
  return static_cast<size_t>(k) & mask;
}

} // namespace

StackTree::StackTree(size_t max_nodes)
    : max_nodes_(max_nodes < 2 ? 2 : max_nodes) {
  slots_.resize(1024);
  nodes_.emplace_back(); // the root, "all"
  nodes_[kRoot].name = intern("all");
}

uint32_t StackTree::find(uint64_t k) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = slot_of(k, mask);; i = (i + 1) & mask) {
    if (slots_[i].node == kNone)
      return kNone;
    if (slots_[i].key == k)
      return slots_[i].node;
  }
}

void StackTree::insert(uint64_t k, uint32_t node) {
  if ((nodes_.size() + 1) * 2 > slots_.size())
    grow();
  const size_t mask = slots_.size() - 1;
  size_t i = slot_of(k, mask);
  while (slots_[i].node != kNone)
    i = (i + 1) & mask;
  slots_[i] = {k, node};
}

void StackTree::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot &s : old) {
    if (s.node == kNone)
      continue;
    size_t i = slot_of(s.key, mask);
    while (slots_[i].node != kNone)
      i = (i + 1) & mask;
    slots_[i] = s;
  }
}

uint32_t StackTree::intern(std::string_view name) {
  auto it = name_ids_.find(name);
  if (it != name_ids_.end())
    return it->second;
  if (names_.size() >= max_nodes_)
    return kNone;
  names_.emplace_back(name);
  uint32_t id = static_cast<uint32_t>(names_.size() - 1);
  name_ids_.emplace(names_.back(), id);
  return id;
}

bool StackTree::add(const std::vector<FrameRef> &frames, double value,
                    uint64_t ns) {
  // The part of the path already in the tree...
  path_.clear();
  uint32_t parent = kRoot;
  size_t i = 0;
  for (; i < frames.size(); i++) {
    auto it = name_ids_.find(frames[i].name);
    if (it == name_ids_.end())
      break;
    bool kernel = i > 0 && frames[i].kind == FrameKind::Kernel;
    uint32_t n = find(key(parent, it->second, kernel));
    if (n == kNone)
      break;
    path_.push_back(n);
    parent = n;
  }
  // ...then the rest, only if all of it fits: a stack is whole or absent.
  const size_t missing = frames.size() - i;
  if (missing > max_nodes_ - nodes_.size() ||
      missing > max_nodes_ - names_.size())
    return false;
  for (; i < frames.size(); i++) {
    uint32_t name = intern(frames[i].name);
    bool kernel = i > 0 && frames[i].kind == FrameKind::Kernel;
    uint32_t n = static_cast<uint32_t>(nodes_.size());
    Node node;
    node.name = name;
    node.parent = parent;
    node.kind = frames[i].kind;
    node.inlined = frames[i].inlined;
    node.next_sibling = nodes_[parent].first_child;
    nodes_.push_back(node);
    nodes_[parent].first_child = n;
    insert(key(parent, name, kernel), n);
    path_.push_back(n);
    parent = n;
  }
  // Each node's value is summed in input order, as the drawing always was.
  nodes_[kRoot].value += value;
  for (uint32_t n : path_)
    nodes_[n].value += value;
  Node &leaf = nodes_[parent];
  leaf.self_ns += ns;
  leaf.self_count++;
  if (frames.size() >= kMaxDrawnFrames)
    truncated_[path_[kMaxDrawnFrames - 2]] += value;
  return true;
}

double StackTree::truncated_value(uint32_t i) const {
  auto it = truncated_.find(i);
  return it == truncated_.end() ? 0 : it->second;
}

} // namespace offcpu
