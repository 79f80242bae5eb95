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

} // namespace offcpu
