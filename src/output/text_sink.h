// Where a long output goes, a piece at a time, as it is made.
#pragma once

#include <functional>
#include <string>

namespace offcpu {

// Takes the next piece; false: stop (the reader went away).
using TextSink = std::function<bool(const std::string &)>;

} // namespace offcpu
