// A sequence held in chunks of about 2 MiB: it grows without copying what
// it holds, and a reader that needs it once frees it chunk by chunk as it
// goes (consume), instead of holding all of it until its end.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace offcpu {

template <typename T> class Chunks {
public:
  // Over malloc's default mmap threshold: a chunk freed goes back to the
  // system, or is reused whole by what is allocated after it.
  static constexpr size_t kPerChunk =
      std::max<size_t>(1, (size_t{2} << 20) / sizeof(T));

  class const_iterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T *;
    using reference = const T &;

    const_iterator(const std::vector<std::vector<T>> *chunks, size_t chunk)
        : chunks_(chunks), chunk_(chunk) {}
    reference operator*() const { return (*chunks_)[chunk_][at_]; }
    pointer operator->() const { return &**this; }
    const_iterator &operator++() {
      if (++at_ == (*chunks_)[chunk_].size()) {
        chunk_++;
        at_ = 0;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++*this;
      return was;
    }
    bool operator==(const const_iterator &o) const {
      return chunk_ == o.chunk_ && at_ == o.at_;
    }
    bool operator!=(const const_iterator &o) const { return !(*this == o); }

  private:
    const std::vector<std::vector<T>> *chunks_;
    size_t chunk_;
    size_t at_ = 0;
  };

  void push_back(T v) {
    if (chunks_.empty() || chunks_.back().size() == kPerChunk) {
      chunks_.emplace_back();
      chunks_.back().reserve(kPerChunk);
    }
    chunks_.back().push_back(std::move(v));
    size_++;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // No chunk is ever empty: begin() of an empty sequence is its end().
  const_iterator begin() const { return {&chunks_, 0}; }
  const_iterator end() const { return {&chunks_, chunks_.size()}; }

  // Calls f on each element, first to last (f may move it away), freeing
  // each chunk once f has seen all of it. Leaves the sequence empty.
  template <typename F> void consume(F &&f) {
    for (std::vector<T> &chunk : chunks_) {
      for (T &v : chunk)
        f(v);
      std::vector<T>().swap(chunk);
    }
    chunks_.clear();
    size_ = 0;
  }

private:
  std::vector<std::vector<T>> chunks_;
  size_t size_ = 0;
};

} // namespace offcpu
