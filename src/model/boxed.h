// An optional value kept on the heap: a pointer's size in its holder when
// absent, for parts most holders lack (a sample's waker and lock: with
// std::optional they were 250 of its 700 bytes, held by every sample of a
// whole-system run to its end, issue #27). Copies copy the value.
#pragma once

#include <memory>
#include <utility>

namespace offcpu {

template <typename T> class Boxed {
public:
  Boxed() = default;
  Boxed(T value) : p_(std::make_unique<T>(std::move(value))) {}
  Boxed(const Boxed &o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed &&) noexcept = default;
  Boxed &operator=(const Boxed &o) {
    if (this != &o)
      p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed &operator=(Boxed &&) noexcept = default;
  ~Boxed() = default;

  explicit operator bool() const { return p_ != nullptr; }
  bool has_value() const { return p_ != nullptr; }
  T &operator*() { return *p_; }
  const T &operator*() const { return *p_; }
  T *operator->() { return p_.get(); }
  const T *operator->() const { return p_.get(); }
  void reset() { p_.reset(); }
  template <typename... Args> T &emplace(Args &&...args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }

private:
  std::unique_ptr<T> p_;
};

} // namespace offcpu
