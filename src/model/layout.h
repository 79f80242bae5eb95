// The one place that decides how a sample's frames line up, root first:
//   thread; [Missed User Stack] or user frames; delimiter (-d, when both
//   parts exist); [Missed Kernel Stack] or kernel frames.
// Every format (folded, text, SVG, pprof) draws this sequence; a new part
// of a sample (a waker stack, a run-queue leaf) is added here once.
#pragma once

#include <vector>

#include "model/profile.h"

namespace offcpu {

struct LayoutOptions {
  bool delimited = false; // a Delimiter frame between user and kernel
};

std::vector<Frame> lay_out(const Sample &s, const LayoutOptions &opts);

} // namespace offcpu
