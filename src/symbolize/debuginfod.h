// Debug files from debuginfod servers (DEBUGINFOD_URLS), through
// libdebuginfod, for build ids without a local debug file (issue #31).
// Files land in root's cache (root's own, so trusted like /usr/lib/debug);
// a run spends at most its time budget on downloads, a stop request (the
// window's end by Ctrl-C) or the run's deadline ends a download at once,
// and a long one says how far it got on stderr.
#pragma once

#include <cstdint>
#include <string>

#include "util/fd.h"

namespace offcpu {

struct DebuginfodStats {
  uint64_t fetched = 0;   // debug files found (downloaded or cached)
  uint64_t not_found = 0; // no server had the build id, or one failed
  uint64_t cut = 0;       // downloads ended by the budget or the end
  uint64_t not_tried = 0; // build ids left once the budget was spent
};

class Debuginfod {
public:
  // Off unless DEBUGINFOD_URLS names a server and `budget_ns` > 0.
  explicit Debuginfod(uint64_t budget_ns);
  ~Debuginfod();
  Debuginfod(const Debuginfod &) = delete;
  Debuginfod &operator=(const Debuginfod &) = delete;

  bool enabled() const { return client_ != nullptr; }
  // The debug file of `build_id` (lowercase hex), open for reading; invalid
  // if none. Gives up at the run's budget, at `deadline_ns`
  // (CLOCK_MONOTONIC, 0: none) or when a stop is requested.
  UniqueFd fetch(const std::string &build_id, uint64_t deadline_ns);
  const DebuginfodStats &stats() const { return stats_; }
  // One line for stderr about what was not had; empty if nothing.
  std::string describe_losses() const;

private:
  static int progress(void *client, long done, long total);
  void *client_ = nullptr; // libdebuginfod's debuginfod_client
  uint64_t left_ns_;
  uint64_t budget_ns_;
  // The download under way: its id, start, deadline, last progress line.
  std::string current_;
  uint64_t started_ns_ = 0, until_ns_ = 0, said_ns_ = 0;
  bool gave_up_ = false;
  DebuginfodStats stats_;
};

} // namespace offcpu
