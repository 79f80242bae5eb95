// The window edges' programs loaded after the attach (issue 27, start-up).
//
// Two task iterators run only at the window's edges: offcpu_seed_stacks
// (the user stacks of the waits open at start, the rewalks, the stop pass)
// and offcpu_flush (the stop pass). They are about a third of what the
// verifier checks before the hooks can attach, and nothing needs them in
// the window's first milliseconds: the waits open at start are seeded by
// the hook's own pass (offcpu_seed_open), and their user stacks are taken
// at their switch-in until the late pass walks those still blocked (the
// edges_later setting). So they are verified on a thread of their own
// while the window is open, and whoever needs them waits for that thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "collect/split_loader.h"

namespace offcpu {

class EdgeLoader {
public:
  // Runs `load` (0 or a negative errno, the programs into its argument) and
  // then, if it succeeded, `then` with them, on a thread of its own (on
  // the caller's if there is none to be had).
  EdgeLoader(std::function<int(SplitPrograms *)> load,
             std::function<void(const SplitPrograms &)> then);
  ~EdgeLoader(); // waits for the thread
  EdgeLoader(const EdgeLoader &) = delete;
  EdgeLoader &operator=(const EdgeLoader &) = delete;

  // Waits until the programs are loaded and `then` has run; the programs,
  // or nullptr if they failed to load (error()).
  const SplitPrograms *wait();
  // Whether wait() would return at once.
  bool done() const;
  int error() const;
  // When the load and `then` were done (CLOCK_MONOTONIC ns; 0 until then).
  uint64_t done_ns() const;

private:
  void run();

  std::function<int(SplitPrograms *)> load_;
  std::function<void(const SplitPrograms &)> then_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false; // guarded by mutex_, as the two below
  int err_ = 0;
  uint64_t done_ns_ = 0;
  SplitPrograms programs_; // written by the thread before done_
  std::thread thread_;
};

} // namespace offcpu
