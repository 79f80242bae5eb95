// The timeline as Chrome trace-event JSON ({"traceEvents": [...]}), which
// Perfetto's UI, chrome://tracing and speedscope open: a track per thread,
// a slice per long wait, an arrow from each waker to the wait it ended.
#pragma once

#include <string>

#include "model/timeline.h"

namespace offcpu {

std::string render_trace_json(const Timeline &t);

} // namespace offcpu
