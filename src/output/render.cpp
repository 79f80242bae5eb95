#include "output/render.h"

#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/pprof.h"
#include "output/text.h"

namespace offcpu {

std::string render(const Profile &profile, OutputFormat format,
                   const RenderOptions &opts) {
  switch (format) {
  case OutputFormat::Text:
    return render_text(profile, opts.delimited);
  case OutputFormat::Folded:
    return render_folded(profile, opts.delimited);
  case OutputFormat::Svg: {
    FlameGraphOptions g;
    g.title = !opts.title.empty() ? opts.title
              : profile.kind == ProfileKind::LockWaits
                  ? "rwsem Wait Flame Graph"
                  : "Off-CPU Time Flame Graph";
    g.width = opts.width;
    g.min_width = opts.min_width;
    return render_flamegraph(flame_stacks(profile, opts.delimited), g);
  }
  case OutputFormat::Pprof:
    return gzip_compress(encode_pprof(profile));
  }
  return {};
}

} // namespace offcpu
