// Scheduling priority of offcpu itself while it traces.
#pragma once

namespace offcpu {

// offcpu's own nice value while it traces.
constexpr int kTracingNice = -10;
// And for the short bursts of work the user waits for: loading and
// attaching (the verifier's ~100 ms of CPU), naming and writing the result
// once the window is over, and the passes that finish stacks walked before
// their tables while their threads still sleep. On a host saturated by
// 2000 threads, at -10 the start-up took 10-14 s in the VM's slow phases
// and the end up to 12 s for a 2 s window (a nice -10 task weighs 9 nice-0
// tasks, a -20 one 87).
constexpr int kBurstNice = -20;

// Raises this process's priority (nice) to `nice` for its lifetime, if it
// is lower, and restores it after. While tracing, offcpu must read the
// maps of a process that announced a new stack before the process exits;
// on a busy host, waiting for a CPU at nice 0 takes longer than a short
// process lives (an exec storm: 70% of its frames named at nice 0, 95% at
// -10). offcpu sleeps nearly all the time, so the boost costs the traced
// work next to nothing.
class PriorityBoost {
public:
  explicit PriorityBoost(int nice);
  ~PriorityBoost();
  PriorityBoost(const PriorityBoost &) = delete;
  PriorityBoost &operator=(const PriorityBoost &) = delete;
  bool active() const { return raised_; }

private:
  int old_ = 0;
  bool raised_ = false;
};

} // namespace offcpu
