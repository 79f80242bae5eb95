// A bpftrace script's running total compared with offcpu's over the same
// window: the truth the lock tests check their totals against.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "support/process.h"

namespace offcpu::test {

// Why bpftrace cannot run the tracepoints under
// /sys/kernel/tracing/events/`events` here (not installed, no tracefs),
// mounting tracefs if needed; empty if it can.
std::string bpftrace_unavailable(const std::string &events);

// offcpu's window, from its -v line "traced from A to B ns".
bool window_of(const std::string &offcpu_err, uint64_t &from, uint64_t &to);

// Of lines "PREFIX TIME TOTAL" (ns), how much TOTAL grew between two
// times, in us.
double growth_us(const std::string &out, const std::string &prefix,
                 uint64_t from, uint64_t to);

// A bpftrace script whose probes add waits, in ns, to @t; it prints
// "T NSECS @t" every 20 ms, so that its total can be read at any moment.
class BpftraceTotal {
public:
  explicit BpftraceTotal(const std::string &probes);
  // Its first total printed: the probes are attached.
  bool attached() const { return attached_; }
  // Stops it; how much its total grew within offcpu's window (offcpu's -v
  // stderr), in us; -1 without the window line.
  double us_between(const std::string &offcpu_err);

private:
  std::unique_ptr<Subprocess> proc_;
  bool attached_ = false;
};

} // namespace offcpu::test
