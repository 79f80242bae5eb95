// Number parsing for text that other users or the kernel produce: strict,
// no allocation, no overflow.
#pragma once

#include <cstdint>
#include <string_view>

namespace offcpu {

// 1 to 16 hex digits (an optional "0x" prefix is the caller's to strip).
inline bool parse_hex(std::string_view s, uint64_t &out) {
  if (s.empty() || s.size() > 16)
    return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

// Takes the next blank-separated field off the front of `line`.
inline std::string_view next_field(std::string_view &line) {
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  size_t end = line.find_first_of(" \t");
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

// Takes the next line (without its newline) off the front of `text`.
inline std::string_view next_line(std::string_view &text) {
  size_t nl = text.find('\n');
  std::string_view line = text.substr(0, nl);
  text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  return line;
}

} // namespace offcpu
