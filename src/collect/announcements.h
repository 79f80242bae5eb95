// The announcement ring of the BPF programs (bpf/announce.bpf.h): new
// (process, user stack) pairs, handed to a callback while the process is
// blocked on that stack, with deferred work done in slices between polls.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "offcpu/unwind.h"
#include "util/fd.h"

namespace offcpu {

class Announcements {
public:
  // `parent`: see offcpu_new_stack.
  using NewStack =
      std::function<void(uint32_t tgid, uint64_t user_stack, uint32_t parent)>;
  // Does deferred work until deadline_ns; true when none is left.
  using IdleWork = std::function<bool(uint64_t deadline_ns)>;
  // True when the run is over for another reason (the traced command
  // exited); asked between polls.
  using Finished = std::function<bool()>;

  // `ring_fd` < 0: the kernel announces nothing; waiting is plain sleeping.
  explicit Announcements(int ring_fd) : ring_fd_(ring_fd) {}

  // A second ring, of the user-stack walker's table requests
  // (struct uw_request), polled with the first.
  // A table request: its process, and the address that asked (0: the
  // process's tables; else in a file whose table is not built yet).
  using Request = std::function<void(const uw_request &)>;
  void add_requests(int ring_fd, Request callback);
  // An eventfd that ends a poll early when readable (and is read then):
  // another thread has work for the idle callback (a table request).
  void wake_on(int event_fd) { wake_fd_ = event_fd; }

  // Until `deadline_ns` (CLOCK_MONOTONIC; 0: none), a stop request or
  // `finished`. True when stopped by a signal or finished.
  bool wait(uint64_t deadline_ns, const NewStack &new_stack,
            const IdleWork &idle, const Finished &finished = {});

  // After the window (or an interval): the announcements still unread
  // (those the programs let wait for the next poll, those of the stop
  // pass), for kBacklogNs at most, a stop request notwithstanding.
  void read_backlog(const NewStack &new_stack);
  // A few hundred under a server load (50 ms of batched ones), up to a few
  // thousand from the stop pass of a busy host: each a map lookup and, for
  // a process not read yet, its maps.
  static constexpr uint64_t kBacklogNs = 250000000;

  // What the ring's callback sees; public for the C callback only.
  struct Context {
    NewStack callback;
    uint64_t deadline = 0;
    Request request;
    bool backlog = false; // read_backlog(): a stop request ends nothing
  };

private:
  // The ring buffer of new stacks (and requests), and the epoll that also
  // wakes on wake_fd_.
  void open_ring();
  // One poll of the ring, up to timeout_ms.
  void poll_ring(int timeout_ms);
  struct RingDeleter {
    void operator()(ring_buffer *r) const { ring_buffer__free(r); }
  };
  int ring_fd_;
  int requests_fd_ = -1;
  int wake_fd_ = -1;
  UniqueFd epoll_; // the ring's epoll and wake_fd_, when there is one
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  Context ctx_;
};

} // namespace offcpu
