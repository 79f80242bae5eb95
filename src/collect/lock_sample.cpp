#include "collect/lock_sample.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "util/utf8.h"

namespace offcpu {

// A global rw_semaphore sits inside its symbol; farther than this from the
// nearest data symbol below it, the address is more likely in the heap.
constexpr uint64_t kMaxOffsetInSymbol = 4096;

std::string describe_lock(uint64_t addr, uint32_t flags,
                          const KernelSymbols &ks) {
  if (flags & RWSEM_LOCK_IS_MMAP)
    return "mmap_lock";
  char buf[64];
  if (auto s = ks.find_data(addr)) {
    uint64_t off = addr - s->addr;
    if (off < kMaxOffsetInSymbol) {
      std::string name(s->name);
      if (off) {
        snprintf(buf, sizeof(buf), "+0x%" PRIx64, off);
        name += buf;
      }
      if (!s->module.empty())
        name.append(" [").append(s->module).append("]");
      return name;
    }
  }
  snprintf(buf, sizeof(buf), "0x%" PRIx64, addr);
  return buf;
}

std::vector<LockSample> symbolize_lock_waits(const RawLockWaits &raw,
                                             Symbolizer &sym,
                                             StackSelection show) {
  if (show.user)
    for (const auto &kv : raw.waits)
      if (const auto *ips = find_stack(raw.stacks, kv.first.user_stack))
        sym.expect_user_stack(kv.first.tgid, kv.first.user_stack, *ips);
  std::vector<LockSample> out;
  out.reserve(raw.waits.size());
  for (const auto &[key, val] : raw.waits) {
    LockSample ls;
    Sample &s = ls.wait;
    s.tgid = key.tgid;
    s.pid = key.pid;
    s.comm = valid_utf8({key.comm, strnlen(key.comm, sizeof(key.comm))});
    s.total_ns = val.total_ns;
    s.count = val.count;
    name_sample_stacks(s, key.user_stack, key.kernel_stack, raw.stacks, sym,
                       show);
    ls.max_ns = val.max_ns;
    ls.write = key.flags & RWSEM_WAIT_WRITE;
    ls.lock =
        valid_utf8(describe_lock(key.lock, key.flags, sym.kernel_symbols()));
    out.push_back(std::move(ls));
  }
  return out;
}

} // namespace offcpu
