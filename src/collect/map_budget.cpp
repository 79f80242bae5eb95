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
// no real run needs it: 1 GiB holds ~970,000 stacks or 8 million keys.
constexpr uint64_t kMaxMapBytes = uint64_t{1} << 30;
constexpr uint64_t kStackItem =
    sizeof(uint64_t) + sizeof(offcpu_stack) + kElementOverhead;

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

uint64_t map_bytes(const MapDemand &d) {
  return d.stacks * kStackItem +
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

void check_map_budget(const MapDemand &d, const FileReader &files) {
  const uint64_t cap = budget_cap(files);
  const uint64_t need = map_bytes(d);
  if (need <= cap)
    return;
  const uint64_t agg_bytes =
      d.aggregation * (d.aggregation_item + kElementOverhead);
  const uint64_t stack_bytes = d.stacks * kStackItem;
  std::string fix;
  if (stack_bytes >= agg_bytes && agg_bytes < cap)
    fix = "--stack-storage-size at most " +
          std::to_string((cap - agg_bytes) / kStackItem);
  else if (stack_bytes < cap)
    fix = "--max-entries at most " +
          std::to_string((cap - stack_bytes) /
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
