// A stack's frames, root first, shared twice over: by every sample that
// holds the same stack, and frame by frame by every stack that holds the
// same frame. Thread churn on a busy host gives tens of thousands of
// samples on a few thousand stacks, and a server's stacks repeat the same
// few hundred frames: a copy of each frame per stack was most of the peak
// heap (postgres under pgbench: 22 MiB of 62, issue #27). Reading yields
// const frames; writing goes through mut(i), which copies the frames' list
// and that frame first if another holder shares them. Non-const access is
// only ever explicit, so a read-only loop never copies by accident.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace offcpu {

template <typename F> class SharedFrames {
public:
  using Item = std::shared_ptr<const F>;
  using Items = std::vector<Item>;

  // Random access over the items, yielding the frames.
  class const_iterator {
  public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = F;
    using difference_type = std::ptrdiff_t;
    using pointer = const F *;
    using reference = const F &;

    const_iterator() = default;
    explicit const_iterator(typename Items::const_iterator it) : it_(it) {}
    reference operator*() const { return **it_; }
    pointer operator->() const { return it_->get(); }
    reference operator[](difference_type n) const { return *it_[n]; }
    const_iterator &operator++() {
      ++it_;
      return *this;
    }
    const_iterator operator++(int) { return const_iterator(it_++); }
    const_iterator &operator--() {
      --it_;
      return *this;
    }
    const_iterator operator--(int) { return const_iterator(it_--); }
    const_iterator &operator+=(difference_type n) {
      it_ += n;
      return *this;
    }
    const_iterator &operator-=(difference_type n) {
      it_ -= n;
      return *this;
    }
    friend const_iterator operator+(const_iterator a, difference_type n) {
      return a += n;
    }
    friend const_iterator operator+(difference_type n, const_iterator a) {
      return a += n;
    }
    friend const_iterator operator-(const_iterator a, difference_type n) {
      return a -= n;
    }
    friend difference_type operator-(const const_iterator &a,
                                     const const_iterator &b) {
      return a.it_ - b.it_;
    }
    friend bool operator==(const const_iterator &a, const const_iterator &b) {
      return a.it_ == b.it_;
    }
    friend bool operator!=(const const_iterator &a, const const_iterator &b) {
      return a.it_ != b.it_;
    }
    friend bool operator<(const const_iterator &a, const const_iterator &b) {
      return a.it_ < b.it_;
    }
    friend bool operator>(const const_iterator &a, const const_iterator &b) {
      return a.it_ > b.it_;
    }
    friend bool operator<=(const const_iterator &a, const const_iterator &b) {
      return a.it_ <= b.it_;
    }
    friend bool operator>=(const const_iterator &a, const const_iterator &b) {
      return a.it_ >= b.it_;
    }

  private:
    typename Items::const_iterator it_{};
  };
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SharedFrames() = default;
  // Frames of their own (each its own copy).
  SharedFrames(std::vector<F> v) {
    Items items;
    items.reserve(v.size());
    for (F &f : v)
      items.push_back(std::make_shared<const F>(std::move(f)));
    assign(std::move(items));
  }
  SharedFrames(std::initializer_list<F> l) : SharedFrames(std::vector<F>(l)) {}
  // Frames shared with whoever else holds the items.
  explicit SharedFrames(Items items) { assign(std::move(items)); }

  size_t size() const { return items().size(); }
  bool empty() const { return items().empty(); }
  const F &operator[](size_t i) const { return *items()[i]; }
  const F &front() const { return *items().front(); }
  const F &back() const { return *items().back(); }
  const_iterator begin() const { return const_iterator(items().begin()); }
  const_iterator end() const { return const_iterator(items().end()); }
  const_reverse_iterator rbegin() const {
    return const_reverse_iterator(end());
  }
  const_reverse_iterator rend() const {
    return const_reverse_iterator(begin());
  }
  // A copy of the frames, for code that edits a list of its own.
  std::vector<F> to_vector() const { return {begin(), end()}; }
  const Items &items() const { return p_ ? *p_ : empty_items(); }

  // Frame i to change: this holder's own copy of it from now on.
  F &mut(size_t i) {
    Items &v = own();
    auto copy = std::make_shared<F>(*v[i]);
    F &f = *copy;
    v[i] = std::move(copy);
    return f;
  }
  void push_back(F f) {
    own().push_back(std::make_shared<const F>(std::move(f)));
  }
  void clear() { p_.reset(); }
  // Removes [first, last), iterators of this holder's frames.
  void erase(const_iterator first, const_iterator last) {
    const auto from = first - begin(), to = last - begin();
    Items &v = own();
    v.erase(v.begin() + from, v.begin() + to);
  }

  // The same for every holder of the same list (null when empty).
  const void *identity() const { return p_.get(); }

private:
  Items &own() {
    if (!p_)
      p_ = std::make_shared<Items>();
    else if (p_.use_count() > 1)
      p_ = std::make_shared<Items>(*p_);
    return *p_;
  }
  void assign(Items v) {
    if (v.empty())
      p_.reset();
    else
      p_ = std::make_shared<Items>(std::move(v));
  }
  static const Items &empty_items() {
    static const Items none;
    return none;
  }

  std::shared_ptr<Items> p_;
};

} // namespace offcpu
