// A stack's frames, root first, shared by every sample that holds the same
// stack. Thread churn on a busy host gives tens of thousands of samples on
// a few thousand stacks: each with its own copy of its frames (names,
// sources), they were most of the peak heap (issue #27). Reading is a
// const std::vector<Frame>; writing goes through mut(), which copies the
// frames first if another holder shares them. Non-const access is only
// ever explicit, so a read-only loop never copies by accident.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

namespace offcpu {

template <typename F> class SharedFrames {
public:
  using Vector = std::vector<F>;
  using const_iterator = typename Vector::const_iterator;
  using const_reverse_iterator = typename Vector::const_reverse_iterator;

  SharedFrames() = default;
  SharedFrames(Vector v) { assign(std::move(v)); }
  SharedFrames(std::initializer_list<F> l) : SharedFrames(Vector(l)) {}

  const Vector &vec() const { return p_ ? *p_ : empty_vector(); }
  operator const Vector &() const { return vec(); }

  size_t size() const { return vec().size(); }
  bool empty() const { return vec().empty(); }
  const F &operator[](size_t i) const { return vec()[i]; }
  const F &front() const { return vec().front(); }
  const F &back() const { return vec().back(); }
  const F *data() const { return vec().data(); }
  const_iterator begin() const { return vec().begin(); }
  const_iterator end() const { return vec().end(); }
  const_reverse_iterator rbegin() const { return vec().rbegin(); }
  const_reverse_iterator rend() const { return vec().rend(); }

  // The frames to change: this holder's own copy from now on.
  Vector &mut() {
    if (!p_)
      p_ = std::make_shared<Vector>();
    else if (p_.use_count() > 1)
      p_ = std::make_shared<Vector>(*p_);
    return *p_;
  }
  void push_back(F f) { mut().push_back(std::move(f)); }
  void clear() { p_.reset(); }
  // Removes [first, last), iterators of this holder's frames.
  void erase(const_iterator first, const_iterator last) {
    const auto from = first - begin(), to = last - begin();
    Vector &v = mut();
    v.erase(v.begin() + from, v.begin() + to);
  }

  // The same for every holder of the same frames (null when empty).
  const void *identity() const { return p_.get(); }

private:
  void assign(Vector v) {
    if (v.empty())
      p_.reset();
    else
      p_ = std::make_shared<Vector>(std::move(v));
  }
  static const Vector &empty_vector() {
    static const Vector none;
    return none;
  }

  std::shared_ptr<Vector> p_;
};

} // namespace offcpu
