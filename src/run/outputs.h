// Where a run's results go: every -o file (each in the format its name
// picks), or stdout. Opened before tracing, so that an unwritable target
// fails before any wait is collected; written all at once at the end.
#pragma once

#include <memory>
#include <vector>

#include "cli/options.h"
#include "model/profile.h"
#include "symbolize/symbolizer.h"
#include "util/output_file.h"

namespace offcpu {

RenderOptions render_options(const OutputOptions &o);
// What DWARF is read for: inlined frames, --lines, and pprof's lines.
SourceOptions source_options(const OutputOptions &o);

class Outputs {
public:
  explicit Outputs(const OutputOptions &o);

  // Renders the profile in every target's format and writes it; only when
  // all are complete are the files renamed into place. False when stdout's
  // reader went away (nothing more to write).
  bool write_all(const Profile &profile);
  // Each target on its own, for reports written as they come (offcpu
  // rwsem's intervals).
  size_t size() const { return files_.size(); }
  OutputFormat format(size_t i) const { return formats_[i]; }
  OutputFile &file(size_t i) { return *files_[i]; }
  void commit();

private:
  OutputOptions options_;
  std::vector<OutputFormat> formats_;
  std::vector<std::unique_ptr<OutputFile>> files_;
};

} // namespace offcpu
