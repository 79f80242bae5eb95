#include "symbolize/perf_map.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/parse.h"

namespace offcpu {
namespace {

constexpr size_t kMaxName = 4096;
// Longer lines are cut here before parsing, in both readers alike.
constexpr size_t kMaxLine = 2 * kMaxName;

bool hex(std::string_view s, uint64_t &out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    s.remove_prefix(2);
  return parse_hex(s, out);
}

} // namespace

bool parse_perf_map_line(std::string_view line, PerfMapLine &out) {
  line = line.substr(0, kMaxLine);
  size_t a = line.find(' ');
  if (a == std::string_view::npos)
    return false;
  size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos)
    return false;
  std::string_view name = line.substr(b + 1);
  while (!name.empty() && (name.back() == '\r' || name.back() == ' '))
    name.remove_suffix(1);
  if (!hex(line.substr(0, a), out.start) ||
      !hex(line.substr(a + 1, b - a - 1), out.size) || out.size == 0 ||
      name.empty() || out.start + out.size < out.start)
    return false;
  out.name = name.substr(0, kMaxName);
  return true;
}

std::vector<PerfMapSymbol> parse_perf_map(std::string_view text) {
  std::vector<PerfMapSymbol> syms;
  while (!text.empty()) {
    PerfMapLine l;
    if (parse_perf_map_line(next_line(text), l))
      syms.push_back({l.start, l.size, std::string(l.name)});
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

PerfMapScan scan_perf_map(int fd, const std::vector<uint64_t> &wanted,
                          uint64_t max_bytes) {
  PerfMapScan scan;
  if (wanted.empty())
    return scan;
  auto take = [&](std::string_view line) {
    PerfMapLine l;
    if (!parse_perf_map_line(line, l))
      return;
    auto it = std::lower_bound(wanted.begin(), wanted.end(), l.start);
    for (; it != wanted.end() && *it - l.start < l.size; ++it)
      scan.names[*it].assign(l.name);
  };
  std::string carry; // a line cut by the end of a chunk, up to kMaxLine
  char buf[65536];
  uint64_t done = 0;
  while (done < max_bytes) {
    size_t want =
        static_cast<size_t>(std::min<uint64_t>(sizeof(buf), max_bytes - done));
    ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      scan.failed = true;
      break;
    }
    if (n == 0)
      break;
    done += static_cast<uint64_t>(n);
    std::string_view chunk(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = chunk.find('\n')) != std::string_view::npos;) {
      if (carry.empty()) {
        take(chunk.substr(0, nl));
      } else {
        carry.append(chunk.substr(0, nl));
        take(carry);
        carry.clear();
      }
      chunk.remove_prefix(nl + 1);
    }
    // Of a line longer than any real one, only what is parsed is kept.
    if (carry.size() < kMaxLine)
      carry.append(chunk.substr(0, kMaxLine - carry.size()));
  }
  if (done >= max_bytes) {
    char extra;
    scan.truncated = ::pread(fd, &extra, 1, static_cast<off_t>(done)) == 1;
  }
  if (!carry.empty() && !scan.truncated)
    take(carry);
  return scan;
}

} // namespace offcpu
