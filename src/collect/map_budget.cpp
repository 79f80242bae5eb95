#include "collect/map_budget.h"

#include <algorithm>
#include <cstdio>

#include "offcpu/shared.h"
#include "util/error.h"
#include "util/parse.h"

namespace offcpu {
namespace {

// A preallocated hash map element: the kernel's htab_elem header (list
// node, hash, padding) besides the key and value, rounded up.
constexpr uint64_t kElementOverhead = 64;
// Beyond this, preallocating the maps alone takes seconds at start, and
// no real run needs it: 1 GiB holds ~970,000 stacks or 3.7 million keys
// (288 bytes each with its latency histogram).
constexpr uint64_t kMaxMapBytes = uint64_t{1} << 30;
constexpr uint64_t kStackItem =
    sizeof(uint64_t) + sizeof(offcpu_short_stack) + kElementOverhead;
constexpr uint64_t kDeepStackItem =
    sizeof(uint64_t) + sizeof(offcpu_stack) + kElementOverhead;
// The deep stacks' share of --stack-storage-size: a quarter, not less. A
// Python frame is two words of its thread's user stack, so a stack of 16
// Python frames is deep already; a web framework's are.
constexpr uint32_t kDeepShare = 4;
// What one stack of --stack-storage-size costs, with its share of deep ones.
constexpr uint64_t kStorageItem = kStackItem + kDeepStackItem / kDeepShare;

// Both stack maps' bytes for --stack-storage-size `stacks`.
uint64_t stack_bytes(uint32_t stacks) {
  return stacks * kStackItem + deep_stack_storage(stacks) * kDeepStackItem;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f GiB",
           static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
uint64_t available_memory(const FileReader &files) {
  auto text = files.read("/proc/meminfo", 1u << 16);
  if (!text)
    return 0;
  std::string_view rest(*text);
  while (!rest.empty()) {
    std::string_view line = next_line(rest);
    if (line.rfind("MemAvailable:", 0) != 0)
      continue;
    line.remove_prefix(13);
    std::string_view kb = next_field(line);
    uint64_t v = 0;
    for (char c : kb) {
      if (c < '0' || c > '9' || v > (UINT64_MAX >> 14))
        return 0;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v * 1024;
  }
  return 0;
}

} // namespace

uint32_t deep_stack_storage(uint32_t stacks) {
  return std::max(stacks / kDeepShare, std::min<uint32_t>(stacks, 64));
}

uint64_t map_bytes(const MapDemand &d) {
  return stack_bytes(d.stacks) +
         d.aggregation * (d.aggregation_item + kElementOverhead);
}

namespace {

uint64_t budget_cap(const FileReader &files) {
  uint64_t avail = available_memory(files);
  if (avail == 0)
    avail = UINT64_MAX;
  return std::min(avail / 8, kMaxMapBytes);
}

} // namespace

uint64_t map_budget_room(const MapDemand &d, const FileReader &files) {
  const uint64_t cap = budget_cap(files), need = map_bytes(d);
  return cap > need ? cap - need : 0;
}

namespace {

// Largest power of two in [floor, ceiling] with `item`-byte elements in
// `bytes`; `floor` when none fits.
uint32_t fit_pow2(uint64_t bytes, uint64_t item, uint32_t floor,
                  uint32_t ceiling) {
  uint32_t n = ceiling;
  while (n > floor && uint64_t{n} * item > bytes)
    n /= 2;
  return n;
}

} // namespace

uint32_t default_stack_storage(const FileReader &files) {
  // 65,536 stacks: 40 MB of kernel memory (both maps), a host with 3.9 GB
  // available. A 30 s whole-system run under pgbench filled 16,384.
  return fit_pow2(budget_cap(files) / 12, kStorageItem, 1024, 65536);
}

uint32_t default_max_entries(uint64_t aggregation_item,
                             const FileReader &files) {
  // Allocated on insert (see bpf/offcpu.bpf.c): the cap costs nothing
  // until a busy host uses it.
  return fit_pow2(budget_cap(files) / 12, aggregation_item + kElementOverhead,
                  4096, 262144);
}

namespace {

// Threads on the host, from /proc/loadavg ("0.00 0.01 0.05 1/345 6789");
// 0 if unknown.
uint32_t host_threads(const FileReader &files) {
  auto text = files.read("/proc/loadavg", 256);
  if (!text)
    return 0;
  size_t slash = text->find('/');
  if (slash == std::string::npos)
    return 0;
  uint32_t n = 0;
  for (size_t i = slash + 1; i < text->size() && (*text)[i] >= '0' &&
                             (*text)[i] <= '9' && n < (1u << 24);
       i++)
    n = n * 10 + static_cast<uint32_t>((*text)[i] - '0');
  return n;
}

} // namespace

uint32_t stop_pass_reserve(uint32_t size, const FileReader &files) {
  // A blocked thread's user stack is taken when it blocks (or by the pass
  // that opens the waits already in progress at start); its kernel stack,
  // with the ORC walker, when it runs again or at stop. A kernel stack and
  // a key each, and room for as many threads again started meanwhile.
  const uint64_t want = uint64_t{host_threads(files)} * 2;
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, size / 8, size / 2));
}

void check_map_budget(const MapDemand &d, const FileReader &files) {
  const uint64_t cap = budget_cap(files);
  const uint64_t need = map_bytes(d);
  if (need <= cap)
    return;
  const uint64_t agg_bytes =
      d.aggregation * (d.aggregation_item + kElementOverhead);
  const uint64_t stacks = stack_bytes(d.stacks);
  std::string fix;
  if (stacks >= agg_bytes && agg_bytes < cap)
    fix = "--stack-storage-size at most " +
          std::to_string((cap - agg_bytes) / kStorageItem);
  else if (stacks < cap)
    fix = "--max-entries at most " +
          std::to_string((cap - stacks) /
                         (d.aggregation_item + kElementOverhead));
  else
    fix = "smaller --stack-storage-size and --max-entries";
  throw usage_error(
      "--stack-storage-size " + std::to_string(d.stacks) +
      " with --max-entries " + std::to_string(d.aggregation) + " needs " +
      gib(need) + " of kernel memory, over the cap of " + gib(cap) +
      " (an eighth of available memory, at most 1 GiB): use " + fix);
}

} // namespace offcpu
