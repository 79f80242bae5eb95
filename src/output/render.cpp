#include "output/render.h"

#include "model/timeline.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/perfetto.h"
#include "output/pprof.h"
#include "output/text.h"
#include "output/trace_json.h"

namespace offcpu {
namespace {

const char *default_title(ProfileKind kind) {
  switch (kind) {
  case ProfileKind::LockWaits:
    return "rwsem Wait Flame Graph";
  case ProfileKind::Folded:
    return "Flame Graph";
  case ProfileKind::OffCpu:
    break;
  }
  return "Off-CPU Time Flame Graph";
}

} // namespace

std::string render(const Profile &profile, OutputFormat format,
                   const RenderOptions &opts) {
  const LayoutOptions layout{opts.delimited, opts.thread};
  switch (format) {
  case OutputFormat::Text:
    return render_text(profile, layout, opts.histograms);
  case OutputFormat::Folded:
    return render_folded(profile, layout);
  case OutputFormat::Svg: {
    FlameGraphOptions g;
    g.title = !opts.title.empty() ? opts.title : default_title(profile.kind);
    if (profile.kind == ProfileKind::Folded)
      g.count_name = profile.folded_unit;
    g.width = opts.width;
    g.min_width = opts.min_width;
    return render_flamegraph(flame_stacks(profile, layout), g);
  }
  case OutputFormat::Pprof:
    return gzip_compress(encode_pprof(profile, layout));
  case OutputFormat::TraceJson:
    return profile.timeline ? render_trace_json(*profile.timeline)
                            : std::string();
  case OutputFormat::Perfetto:
    return profile.timeline ? render_perfetto(*profile.timeline)
                            : std::string();
  }
  return {};
}

bool render_to(const Profile &profile, OutputFormat format,
               const RenderOptions &opts, const TextSink &sink) {
  if (format == OutputFormat::TraceJson && profile.timeline)
    return write_trace_json(*profile.timeline, sink);
  if (format == OutputFormat::Perfetto && profile.timeline)
    return write_perfetto(*profile.timeline, sink);
  if (format == OutputFormat::Folded)
    return write_folded(profile, {opts.delimited, opts.thread}, sink);
  if (format == OutputFormat::Text)
    return write_text(profile, {opts.delimited, opts.thread}, opts.histograms,
                      sink);
  return sink(render(profile, format, opts));
}

} // namespace offcpu
