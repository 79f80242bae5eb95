// The timeline as Chrome trace-event JSON ({"traceEvents": [...]}), which
// Perfetto's UI, chrome://tracing and speedscope open: a track per thread,
// a slice per long wait, an arrow from each waker to the wait it ended.
#pragma once

#include <string>

#include "model/timeline.h"
#include "output/text_sink.h"

namespace offcpu {

// Streams the JSON through `sink` in pieces of about a megabyte, so that
// what it holds is the timeline, not the timeline and its text. False if
// the sink stopped it.
bool write_trace_json(const Timeline &t, const TextSink &sink);

// The whole JSON as one string (tests, small timelines).
std::string render_trace_json(const Timeline &t);

} // namespace offcpu
