// One entry point for every format of both commands: the model in, the
// bytes of the chosen format out.
#pragma once

#include <string>

#include "model/layout.h"
#include "model/profile.h"
#include "output/text_sink.h"

namespace offcpu {

// TraceJson and Perfetto are the timeline of long waits (Profile::timeline).
enum class OutputFormat { Text, Folded, Svg, Pprof, TraceJson, Perfetto };

struct RenderOptions {
  bool delimited = false; // a '-' between user and kernel frames
  ThreadFrame thread = ThreadFrame::Comm; // --per-pid, --per-thread
  std::string title;       // SVG title; empty: the profile kind's own
  int width = 1200;        // SVG width in pixels
  double min_width = 0.1;  // SVG: narrower frames are left out
  bool histograms = false; // text: each stack's latency histogram (-v)
};

// Text and folded are whole reports; pprof is gzip-compressed.
std::string render(const Profile &profile, OutputFormat format,
                   const RenderOptions &opts);

// The same through `sink`: the timeline's JSON and Perfetto trace, the
// text report and folded text a piece at a time as they are made (a long run's
// are hundreds of megabytes, a whole-system report tens), the others whole.
// False if the sink stopped it.
bool render_to(const Profile &profile, OutputFormat format,
               const RenderOptions &opts, const TextSink &sink);

} // namespace offcpu
