// --top-waits N: the longest waits of the timeline as text, for a terminal.
#pragma once

#include <cstddef>
#include <string>

#include "model/timeline.h"

namespace offcpu {

std::string render_top_waits(const Timeline &t, size_t n);

// A CLOCK_MONOTONIC time as local wall-clock time, "HH:MM:SS.uuuuuu".
std::string wall_clock_text(uint64_t monotonic_ns, int64_t realtime_offset_ns);

} // namespace offcpu
