#include "util/utf8.h"

namespace offcpu {
namespace {

// Length of the valid UTF-8 character starting at s[i], or 0 (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF).
size_t char_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  if (c < 0x80)
    return c < 0x20 || c == 0x7f ? 0 : 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf; // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0;
    else if (c == 0xed)
      hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0)
      lo = 0x90;
    else if (c == 0xf4)
      hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < n; k++)
    if (at(i + k) < 0x80 || at(i + k) > 0xbf)
      return 0;
  return n;
}

} // namespace

bool is_clean_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = char_length(s, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

std::string valid_utf8(std::string_view s) {
  if (is_clean_utf8(s))
    return std::string(s);
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t n = char_length(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(s[i++]);
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string_view utf8_prefix(std::string_view s, size_t max_chars) {
  size_t i = 0;
  for (size_t chars = 0; i < s.size() && chars < max_chars; chars++) {
    size_t n = char_length(s, i);
    i += n ? n : 1;
  }
  return s.substr(0, i);
}

size_t utf8_length(std::string_view s) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); chars++) {
    size_t n = char_length(s, i);
    i += n ? n : 1;
  }
  return chars;
}

} // namespace offcpu
