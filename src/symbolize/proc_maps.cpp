#include "symbolize/proc_maps.h"

#include <algorithm>
#include <cstdlib>

#include "util/parse.h"

namespace offcpu {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

bool parse_dec(std::string_view s, uint64_t &out) {
  if (s.empty() || s.size() > 20)
    return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

bool parse_line(std::string_view line, Mapping &m) {
  std::string_view range = next_field(line);
  std::string_view perms = next_field(line);
  std::string_view offset = next_field(line);
  std::string_view dev = next_field(line);
  std::string_view inode = next_field(line);
  size_t dash = range.find('-');
  size_t colon = dev.find(':');
  uint64_t major = 0, minor = 0;
  if (dash == std::string_view::npos || colon == std::string_view::npos ||
      perms.size() < 4 || !parse_hex(range.substr(0, dash), m.start) ||
      !parse_hex(range.substr(dash + 1), m.end) || m.end <= m.start ||
      !parse_hex(offset, m.offset) || !parse_hex(dev.substr(0, colon), major) ||
      !parse_hex(dev.substr(colon + 1), minor) || !parse_dec(inode, m.inode))
    return false;
  m.dev_major = static_cast<uint32_t>(major);
  m.dev_minor = static_cast<uint32_t>(minor);
  m.executable = perms[2] == 'x';
  size_t path_start = line.find_first_not_of(' ');
  m.path = path_start == std::string_view::npos
               ? std::string()
               : std::string(line.substr(path_start));
  return true;
}

} // namespace

bool Mapping::deleted() const {
  return path.size() > kDeleted.size() &&
         path.compare(path.size() - kDeleted.size(), kDeleted.size(),
                      kDeleted) == 0;
}

std::string Mapping::real_path() const {
  return deleted() ? path.substr(0, path.size() - kDeleted.size()) : path;
}

std::string Mapping::display_name() const {
  std::string p = real_path();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::vector<Mapping> parse_proc_maps(std::string_view text) {
  std::vector<Mapping> maps;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    Mapping m;
    if (parse_line(line, m))
      maps.push_back(std::move(m));
  }
  std::sort(maps.begin(), maps.end(), [](const Mapping &a, const Mapping &b) {
    return a.start < b.start;
  });
  return maps;
}

const Mapping *find_mapping(const std::vector<Mapping> &maps, uint64_t addr) {
  auto it = std::upper_bound(
      maps.begin(), maps.end(), addr,
      [](uint64_t a, const Mapping &m) { return a < m.start; });
  if (it == maps.begin())
    return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

} // namespace offcpu
