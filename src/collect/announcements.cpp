#include "collect/announcements.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "collect/bpf_util.h"
#include "offcpu/shared.h"
#include "offcpu/unwind.h"
#include "util/signals.h"

namespace offcpu {
namespace {

// Deferred work between two polls of the ring: announcements are handled
// within one slice of arriving. Short, as a process may live only a few
// milliseconds after its announcement and its maps must be read by then.
constexpr uint64_t kIdleSliceNs = 2000000;

int on_new_stack(void *ctx, void *data, size_t size) {
  auto *c = static_cast<Announcements::Context *>(ctx);
  if (size >= sizeof(offcpu_new_stack)) {
    offcpu_new_stack ev;
    std::memcpy(&ev, data, sizeof(ev));
    c->callback(ev.tgid, ev.user_stack, ev.parent);
  }
  // A flood of announcements must not hold the loop past the window's end
  // or a Ctrl-C: the rest waits for the next poll.
  if ((!c->backlog && stop_requested()) ||
      (c->deadline && monotonic_ns() >= c->deadline))
    return -EINTR;
  return 0;
}

int on_request(void *ctx, void *data, size_t size) {
  auto *c = static_cast<Announcements::Context *>(ctx);
  if (size >= sizeof(uw_request) && c->request) {
    uw_request r;
    std::memcpy(&r, data, sizeof(r));
    c->request(r);
  }
  return 0;
}

} // namespace

void Announcements::add_requests(int ring_fd, Request callback) {
  requests_fd_ = ring_fd;
  ctx_.request = std::move(callback);
}

void Announcements::open_ring() {
  ring_.reset(ring_buffer__new(ring_fd_, on_new_stack, &ctx_, nullptr));
  if (ring_ && requests_fd_ >= 0)
    ring_buffer__add(ring_.get(), requests_fd_, on_request, &ctx_);
  if (!ring_ || wake_fd_ < 0)
    return;
  // One epoll over the ring's and the wake-up: a request read by another
  // thread is handled at once, not after the 50 ms timeout.
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (!epoll_ ||
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, ring_buffer__epoll_fd(ring_.get()),
                &ev) != 0 ||
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_, &ev) != 0)
    epoll_.reset(); // plain polls: late by the timeout at most
}

void Announcements::poll_ring(int timeout_ms) {
  // EINTR on a signal: the caller's loop checks.
  if (!epoll_) {
    ring_buffer__poll(ring_.get(), timeout_ms);
  } else {
    epoll_event ev;
    if (epoll_wait(epoll_.get(), &ev, 1, timeout_ms) > 0) {
      uint64_t count;
      if (read(wake_fd_, &count, sizeof(count)) < 0) {
        // Not this one that was ready: nothing to read.
      }
    }
  }
  // Read whether or not the ring woke the poll: a known process's new
  // stacks are announced without a wakeup (bpf/announce.bpf.h) and wait
  // for this, one timeout at most.
  ring_buffer__consume(ring_.get());
}

void Announcements::read_backlog(const NewStack &new_stack) {
  if (ring_fd_ < 0)
    return;
  if (!ring_)
    open_ring();
  if (!ring_)
    return;
  ctx_.callback = new_stack;
  ctx_.deadline = monotonic_ns() + kBacklogNs;
  ctx_.backlog = true;
  ring_buffer__consume(ring_.get());
  ctx_.backlog = false;
}

bool Announcements::wait(uint64_t deadline, const NewStack &new_stack,
                         const IdleWork &idle, const Finished &finished) {
  ctx_.callback = new_stack;
  ctx_.deadline = deadline;
  if (ring_fd_ >= 0 && !ring_)
    open_ring();
  bool work_left = true;
  while (!stop_requested()) {
    if (finished && finished())
      return true;
    uint64_t now = monotonic_ns();
    if (deadline && now >= deadline)
      return false;
    if (work_left && idle)
      work_left = !idle(now + kIdleSliceNs);
    int timeout_ms = 50;
    if (work_left) {
      timeout_ms = 0;
    } else if (deadline) {
      now = monotonic_ns();
      if (now >= deadline)
        return false;
      timeout_ms = static_cast<int>(
          std::min<uint64_t>(50, (deadline - now) / 1000000 + 1));
    }
    if (ring_) {
      // New stacks may have brought files to parse, and deferred work held
      // back may be due: idle work runs after every poll, at least every
      // 50 ms.
      poll_ring(timeout_ms);
      work_left = true;
    } else if (timeout_ms > 0) {
      wait_for_stop(timeout_ms / 1000.0);
    }
  }
  return true;
}

} // namespace offcpu
