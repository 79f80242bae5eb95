// A memo of values by key, for lookups that mostly hit: the keys in one
// open-addressed array (a lookup reads a slot or a few in a row, where a
// node-based table reads a bucket, then a node), the values in a deque (a
// reference stays valid as the memo grows). Naming a server's profile looks
// a frame up per frame of every stack: a million lookups in 30 s of
// postgres. Costs nothing until the first add, and little after it: the
// timeline names each distinct wait with memos of its own.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace offcpu {

template <class Key, class Value, class Hash> class FlatMemo {
public:
  // Null if `key` was never added.
  Value *find(const Key &key) {
    if (slots_.empty())
      return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      const Slot &s = slots_[i];
      if (s.index == kEmpty)
        return nullptr;
      if (s.key == key)
        return &(*values_)[s.index];
    }
  }

  // Adds `key`, which find() did not have.
  Value &add(const Key &key, Value value) {
    assert(!find(key));
    if (!values_)
      values_.emplace();
    assert(values_->size() < kEmpty);
    if ((values_->size() + 1) * 2 > slots_.size())
      grow();
    values_->push_back(std::move(value));
    place(key, static_cast<uint32_t>(values_->size() - 1));
    return values_->back();
  }

  size_t size() const { return values_ ? values_->size() : 0; }

private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    Key key{};
    uint32_t index = kEmpty;
  };

  size_t mask() const { return slots_.size() - 1; }
  // The hash's high bits, spread by a multiply: a hash of addresses may
  // differ in a few bits only.
  size_t home(const Key &key) const {
    const uint64_t h =
        static_cast<uint64_t>(Hash()(key)) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h >> 32) & mask();
  }
  void place(const Key &key, uint32_t index) {
    size_t i = home(key);
    while (slots_[i].index != kEmpty)
      i = (i + 1) & mask();
    slots_[i] = Slot{key, index};
  }
  void grow() {
    const size_t n = slots_.empty() ? 16 : slots_.size() * 2;
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(n));
    for (const Slot &s : old)
      if (s.index != kEmpty)
        place(s.key, s.index);
  }

  std::vector<Slot> slots_;                 // a power of two, at most half full
  std::optional<std::deque<Value>> values_; // a deque allocates when made
};

} // namespace offcpu
