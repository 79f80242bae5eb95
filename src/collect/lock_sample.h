// Symbolized rwsem waits: one per (thread, stacks, lock, side).
#pragma once

#include <string>
#include <vector>

#include "collect/rwsem_session.h"
#include "collect/sample.h"

namespace offcpu {

struct LockSample {
  Sample wait; // thread, stacks, total_ns and count of the waits
  uint64_t max_ns = 0;
  bool write = true; // else a read-side wait
  std::string lock;  // "mmap_lock", a kernel symbol, or an address
};

// "mmap_lock" for the waiter's own mm, else the global symbol holding the
// lock ("sym" or "sym+0x40"), else its address.
std::string describe_lock(uint64_t addr, uint32_t flags,
                          const KernelSymbols &ks);

std::vector<LockSample> symbolize_lock_waits(const RawLockWaits &raw,
                                             Symbolizer &sym,
                                             StackSelection show);

} // namespace offcpu
