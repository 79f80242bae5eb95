// Finishes, on a thread of its own, the user stacks walked before their
// process's unwind tables were ready (bpf/user_unwind.bpf.h): the seeding
// iterator walks them again while their threads still sleep on them.
//
// Its own thread, because a child of an exec storm sleeps a few ms and the
// main thread's slices of table building, map reading and naming last up
// to ~15 ms on a busy host: the requests ring is read here, the pass runs
// at once, and the processes asked for are handed to the main thread.
#pragma once

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "offcpu/unwind.h"
#include "util/fd.h"

namespace offcpu {

class Rewalker {
public:
  // `requests_ring`: the walker's table requests (struct uw_request), or
  // -1. `pass`: one run of the iterator; true if it left threads for
  // another. `pass_on_request`: a request alone
  // makes a pass worth it (the walk finds files' tables from the process's
  // mappings: bpf_find_vma); else only installs do.
  Rewalker(int requests_ring, std::function<bool()> pass, bool pass_on_request);
  ~Rewalker();
  Rewalker(const Rewalker &) = delete;
  Rewalker &operator=(const Rewalker &) = delete;

  // Whether its thread reads the requests ring (else the caller must).
  bool reads_requests() const { return ring_ && thread_.joinable(); }
  // Tables were installed: a pass soon.
  void installed();
  // The processes whose tables were asked for since the last call.
  std::vector<uw_request> take_requests();
  // An eventfd made readable at each request, for the thread that takes
  // them to wake on (-1: none).
  int requests_event() const { return requested_.get(); }
  // Ends the thread; no pass runs after this returns (the session's stop
  // runs the same iterator).
  void stop();

  // For the ring's C callback.
  void on_request(const uw_request &r);

  // Passes run so far and the CPU time they took (the iterator's kernel
  // work is this thread's), for -v.
  struct Stats {
    uint64_t passes = 0;
    uint64_t cpu_ns = 0;
  };
  Stats stats() const { return {passes_.load(), cpu_ns_.load()}; }

private:
  struct RingDeleter {
    void operator()(ring_buffer *r) const { ring_buffer__free(r); }
  };
  void run();
  void wake();

  std::function<bool()> pass_;
  bool pass_on_request_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  UniqueFd epoll_, event_, requested_;
  std::mutex mutex_;
  std::vector<uw_request> requests_; // guarded by mutex_
  std::atomic<bool> install_due_{false}, stopping_{false};
  bool request_due_ = false; // the thread's own
  std::atomic<uint64_t> passes_{0}, cpu_ns_{0};
  std::thread thread_;
};

} // namespace offcpu
