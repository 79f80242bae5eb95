// What offcpu itself costs, measured by the kernel: the run time of its BPF
// programs (BPF_ENABLE_STATS, held by offcpu for its own run rather than
// the system-wide sysctl), per context switch and as a share of the CPUs
// over the window, and the CPU time of offcpu's own process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/fd.h"

namespace offcpu {

struct ProgramCost {
  std::string name;
  uint64_t runs = 0;
  uint64_t run_ns = 0;
};

struct CostReport {
  bool available = false; // the kernel keeps run-time statistics
  uint64_t events = 0;    // runs of the first program (sched_switch...)
  uint64_t bpf_ns = 0;    // all programs' run time
  double cpu_share = 0;   // bpf_ns over window x CPUs
  double user_cpu_s = 0;  // offcpu's own process, user + system
  std::vector<ProgramCost> programs;
  // One line for stderr; `event`, `plural`: what the first program's runs
  // are, one and many.
  std::string summary(const char *event = "context switch",
                      const char *plural = "switches") const;
  // -v: a line per program that ran, its runs and time each.
  std::string per_program() const;
};

class SelfCost {
public:
  // Turns the kernel's statistics on (5.8+; where it refuses, they count
  // only if the sysctl kernel.bpf_stats_enabled is on).
  SelfCost();
  // The programs to account, the one whose runs are the events (the
  // sched_switch one, a lock contention's begin) first; -1s are skipped.
  void watch(const std::vector<int> &prog_fds);
  // From now: the window opens.
  void start();
  CostReport report(uint64_t window_ns) const;

private:
  UniqueFd stats_;
  std::vector<int> progs_;
  std::vector<ProgramCost> base_;
  double user_cpu_base_ = 0;
};

} // namespace offcpu
