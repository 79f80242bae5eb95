#include "run/emit.h"

#include <time.h>

#include "output/flamegraph.h"
#include "output/folded.h"

namespace offcpu {

std::string render_samples(const std::vector<Sample> &samples,
                           const OutputOptions &out,
                           const std::string &default_title,
                           const PprofOptions &pprof) {
  switch (out.format) {
  case OutputFormat::Svg: {
    FlameGraphOptions g;
    g.title = out.title.empty() ? default_title : out.title;
    g.width = out.width;
    g.min_width = out.min_width;
    return render_flamegraph(stacks_from_samples(samples, out.delimited), g);
  }
  case OutputFormat::Pprof:
    return gzip_compress(encode_pprof(samples, pprof));
  default:
    return format_folded(samples, FoldedOptions{out.delimited});
  }
}

int64_t wall_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace offcpu
