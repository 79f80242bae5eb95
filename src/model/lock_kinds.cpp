#include "model/lock_kinds.h"

#include "offcpu/shared.h"

namespace offcpu {
namespace {

// In offcpu_lock_kind's order.
constexpr const char *kNames[OFFCPU_LOCK_KINDS] = {
    "semaphore",
    "mutex",
    "rwsem:read",
    "rwsem:write",
    "rtmutex",
    "rwlock-rt:read",
    "rwlock-rt:write",
    "percpu-rwsem:read",
    "percpu-rwsem:write",
    "other",
    "mutex:spin",
    "spinlock",
    "rwlock:read",
    "rwlock:write",
    "futex",
    "futex:pi",
};

} // namespace

std::string lock_kind_name(uint32_t kind) {
  return kind < OFFCPU_LOCK_KINDS ? kNames[kind] : "lock";
}

std::optional<uint32_t> lock_kinds_named(const std::string &name) {
  uint32_t bits = 0;
  for (uint32_t k = 0; k < OFFCPU_LOCK_KINDS; k++) {
    const std::string n = kNames[k];
    // A family ("rwsem") is both its sides; "mutex" is not "mutex:spin".
    bool family =
        n.size() > name.size() && n.compare(0, name.size(), name) == 0 &&
        n[name.size()] == ':' && n.compare(name.size() + 1, 4, "spin") != 0;
    if (n == name || family)
      bits |= 1u << k;
  }
  if (!bits)
    return std::nullopt;
  // A kind's own name is that kind alone ("futex", not "futex:pi").
  for (uint32_t k = 0; k < OFFCPU_LOCK_KINDS; k++)
    if (name == kNames[k])
      return 1u << k;
  return bits;
}

std::string lock_kind_names() {
  std::string out;
  for (const char *n : kNames)
    out += (out.empty() ? "" : ",") + std::string(n);
  return out;
}

} // namespace offcpu
