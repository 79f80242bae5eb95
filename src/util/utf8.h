// Names from other users' files and the kernel (comms, symbols, perf maps)
// are bytes, not text. Every name shown is made valid UTF-8 first, so that
// SVG (XML), pprof (protobuf strings) and terminals accept it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace offcpu {

// `s` with each byte that is not part of a valid UTF-8 character, and each
// control character, written visibly as \xNN.
std::string valid_utf8(std::string_view s);

// True if valid_utf8 would return `s` unchanged.
bool is_clean_utf8(std::string_view s);

// The longest prefix of valid UTF-8 `s` holding at most `max_chars`
// characters (code points): a cut never splits one.
std::string_view utf8_prefix(std::string_view s, size_t max_chars);

// Characters (code points) in valid UTF-8 `s`.
size_t utf8_length(std::string_view s);

} // namespace offcpu
