#include "run/outputs.h"

#include "output/render.h"

namespace offcpu {

SourceOptions source_options(const OutputOptions &o) {
  SourceOptions s;
  s.inlined = o.inline_frames;
  s.lines = o.lines;
  s.python = o.python_frames;
  bool pprof = o.format == OutputFormat::Pprof;
  for (const OutputTarget &t : o.targets)
    pprof = pprof || t.format == OutputFormat::Pprof;
  s.dwarf = s.inlined || s.lines || pprof;
  s.files = s.lines || pprof;
  s.own_dwarf = false;
  return s;
}

RenderOptions render_options(const OutputOptions &o) {
  RenderOptions r;
  r.delimited = o.delimited;
  r.thread = o.thread;
  r.title = o.title;
  r.width = o.width;
  r.min_width = o.min_width;
  r.histograms = o.histograms;
  return r;
}

Outputs::Outputs(const OutputOptions &o) : options_(o) {
  std::vector<OutputTarget> targets = o.targets;
  if (targets.empty())
    targets.push_back({"", o.format});
  for (const OutputTarget &t : targets) {
    formats_.push_back(t.format);
    files_.push_back(std::make_unique<OutputFile>(
        t.path.empty() ? std::nullopt : std::optional<std::string>(t.path)));
  }
}

bool Outputs::write_all(const Profile &profile) {
  const RenderOptions r = render_options(options_);
  for (size_t i = 0; i < files_.size(); i++) {
    OutputFile &file = *files_[i];
    auto sink = [&file](const std::string &piece) {
      return file.write(piece) == WriteResult::Ok;
    };
    if (!render_to(profile, formats_[i], r, sink))
      return false;
  }
  commit();
  return true;
}

void Outputs::commit() {
  for (auto &f : files_)
    f->commit();
}

} // namespace offcpu
