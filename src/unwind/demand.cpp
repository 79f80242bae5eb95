#include "unwind/demand.h"

#include <bpf/bpf.h>
#include <errno.h>

#include <unordered_set>
#include <vector>

#include "offcpu/unwind.h"

namespace offcpu {
namespace {

void read_each(int fd, const std::deque<uint32_t> &queue, size_t most,
               DemandReading &r) {
  size_t n = 0;
  for (uint32_t tgid : queue) {
    if (n++ == most)
      break;
    uw_demand d{};
    ++r.syscalls;
    if (bpf_map_lookup_elem(fd, &tgid, &d) == 0)
      r.walks[tgid] = d.walks;
  }
}

// False where the kernel has no batch lookup of this map (nothing kept).
bool read_batches(int fd, const std::deque<uint32_t> &queue, DemandReading &r) {
  const std::unordered_set<uint32_t> queued(queue.begin(), queue.end());
  std::vector<uint32_t> keys(kDemandBatch);
  std::vector<uw_demand> values(kDemandBatch);
  uint32_t in = 0, out = 0; // the hash map's bucket to go on from
  for (bool first = true;; first = false) {
    uint32_t count = kDemandBatch;
    ++r.syscalls;
    int err = bpf_map_lookup_batch(fd, first ? nullptr : &in, &out, keys.data(),
                                   values.data(), &count, nullptr);
    // ENOENT: the last batch (its entries are returned).
    if (err && errno != ENOENT) {
      r.walks.clear();
      return false;
    }
    for (uint32_t i = 0; i < count && i < kDemandBatch; i++)
      if (queued.count(keys[i]))
        r.walks[keys[i]] = values[i].walks;
    if (err)
      return true;
    in = out;
  }
}

} // namespace

DemandReading read_demand(int asked_fd, const std::deque<uint32_t> &queue) {
  DemandReading r;
  if (queue.size() <= kDemandDirect)
    read_each(asked_fd, queue, kDemandDirect, r);
  else if (!read_batches(asked_fd, queue, r))
    read_each(asked_fd, queue, kDemandDirect, r);
  return r;
}

} // namespace offcpu
