// The timeline as Perfetto's protobuf trace (perfetto.protos.Trace), for
// ui.perfetto.dev and trace_processor: a track per process and thread, a
// slice per long wait with its details as debug annotations, and a flow
// (arrow) from each waker's wakeup to the wait it ended.
#pragma once

#include <string>

#include "model/timeline.h"
#include "output/text_sink.h"

namespace offcpu {

// Streams the trace through `sink` a megabyte at a time; false if the sink
// stopped it.
bool write_perfetto(const Timeline &t, const TextSink &sink);

// The whole trace as one string (tests, small timelines).
std::string render_perfetto(const Timeline &t);

} // namespace offcpu
