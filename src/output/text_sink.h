// Where a long output goes, a piece at a time, as it is made.
#pragma once

#include <functional>
#include <string>

namespace offcpu {

// Takes the next piece; false: stop (the reader went away).
using TextSink = std::function<bool(const std::string &)>;

// What `write` (a call taking a TextSink) hands its sink, whole: for the
// callers that want one string.
template <typename Write> std::string collect_text(Write write) {
  std::string out;
  write([&out](const std::string &piece) {
    out += piece;
    return true;
  });
  return out;
}

} // namespace offcpu
