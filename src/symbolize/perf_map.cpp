#include "symbolize/perf_map.h"

#include <algorithm>

#include "util/parse.h"

namespace offcpu {
namespace {

constexpr size_t kMaxName = 4096;

bool hex(std::string_view s, uint64_t &out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    s.remove_prefix(2);
  return parse_hex(s, out);
}

} // namespace

std::vector<PerfMapSymbol> parse_perf_map(std::string_view text) {
  std::vector<PerfMapSymbol> syms;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    size_t a = line.find(' ');
    if (a == std::string_view::npos)
      continue;
    size_t b = line.find(' ', a + 1);
    if (b == std::string_view::npos)
      continue;
    PerfMapSymbol s;
    std::string_view name = line.substr(b + 1);
    while (!name.empty() && (name.back() == '\r' || name.back() == ' '))
      name.remove_suffix(1);
    if (!hex(line.substr(0, a), s.start) ||
        !hex(line.substr(a + 1, b - a - 1), s.size) || s.size == 0 ||
        name.empty() || s.start + s.size < s.start)
      continue;
    s.name.assign(name.substr(0, kMaxName));
    syms.push_back(std::move(s));
  }
  std::stable_sort(syms.begin(), syms.end(),
                   [](const PerfMapSymbol &x, const PerfMapSymbol &y) {
                     return x.start < y.start;
                   });
  return syms;
}

const PerfMapSymbol *find_perf_symbol(const std::vector<PerfMapSymbol> &syms,
                                      uint64_t addr) {
  auto it = std::upper_bound(
      syms.begin(), syms.end(), addr,
      [](uint64_t a, const PerfMapSymbol &s) { return a < s.start; });
  // Later entries win (a JIT may reuse memory): look back a little.
  for (int back = 0; back < 4 && it != syms.begin(); back++) {
    --it;
    if (addr - it->start < it->size)
      return &*it;
  }
  return nullptr;
}

} // namespace offcpu
