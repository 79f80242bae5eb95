// The human-readable report, laid out like BCC's offcputime: per stack the
// kernel frames leaf first, then the user frames leaf first, the thread,
// and what its waits add up to: off-CPU time and how many waits; for lock
// waits also the lock, the side and the maximum and average wait. Then,
// for more than one wait, how long they lasted: the longest, and p50 and
// p99 estimated from the log2 histogram (marked ~); with `histograms`
// (-v) the histogram itself, as BCC's *dist tools draw it.
// Smallest first, so the largest ends up nearest the prompt.
#pragma once

#include <string>

#include "model/layout.h"
#include "model/profile.h"
#include "output/text_sink.h"

namespace offcpu {

std::string render_text(const Profile &profile, const LayoutOptions &layout,
                        bool histograms = false);
// The same through `sink`, a piece at a time; false if the sink stopped it.
bool write_text(const Profile &profile, const LayoutOptions &layout,
                bool histograms, const TextSink &sink);

// A distribution's log2 histogram, one line a bucket from the first to the
// last non-empty one (BCC's *dist layout), indented 8; empty if no waits.
std::string latency_histogram(const Latency &l);

} // namespace offcpu
