#include "collect/rewalker.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <system_error>
#include <utility>

#include "offcpu/unwind.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/priority.h"
#include "util/signals.h"

namespace offcpu {
namespace {

// At most one pass per gap: each iterates every task (~0.2 ms of CPU with
// a storm's few hundred), and a storm asks hundreds of times a second.
// Requests are urgent (a child may sleep 2 ms); installs less so (the
// thread was walked once already, partially).
constexpr uint64_t kRequestGapNs = 1000000;
constexpr uint64_t kInstallGapNs = 3000000;
// Each pass visits every task of the host: with thousands (a whole-system
// run beside a build) one took milliseconds of CPU, and at a pass per
// request gap it was most of offcpu's CPU (issue #27). The gap after a
// pass is at least this many times its CPU time, so that passes take at
// most a tenth of a CPU; a few hundred tasks keep the 1 ms gap. Capped at
// 20 ms: an exec storm's children sleep ~10 ms, and a huge host still gets
// its stacks walked again while they sleep.
constexpr uint64_t kGapPerPassCpu = 9;
constexpr uint64_t kMaxGapNs = 20000000;

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ts.tv_nsec);
}

int on_request_event(void *ctx, void *data, size_t size) {
  if (size >= sizeof(uw_request)) {
    uw_request r;
    std::memcpy(&r, data, sizeof(r));
    static_cast<Rewalker *>(ctx)->on_request(r);
  }
  return 0;
}

} // namespace

Rewalker::Rewalker(int requests_ring, std::function<bool()> pass,
                   bool pass_on_request)
    : pass_(std::move(pass)), pass_on_request_(pass_on_request),
      epoll_(epoll_create1(EPOLL_CLOEXEC)),
      event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      requested_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_ || !event_) {
    fprintf(stderr,
            "offcpu: warning: stacks walked before their tables are "
            "not walked again: %s\n",
            errno_text(errno).c_str());
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = 0;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, event_.get(), &ev);
  if (requests_ring >= 0) {
    ring_.reset(
        ring_buffer__new(requests_ring, on_request_event, this, nullptr));
    if (ring_) {
      ev.data.u32 = 1;
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, ring_buffer__epoll_fd(ring_.get()),
                &ev);
    } else {
      fprintf(stderr, "offcpu: warning: unwind table requests not read: %s\n",
              errno_text(errno).c_str());
    }
  }
  // Signals stay with the main thread, which turns them into a stop.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error &e) {
    // Out of threads: what was collected matters more (reads_requests()
    // tells the caller to read the requests itself).
    fprintf(stderr,
            "offcpu: warning: stacks walked before their tables are "
            "not walked again: %s\n",
            e.what());
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

Rewalker::~Rewalker() {
  stop();
}

void Rewalker::stop() {
  if (!thread_.joinable())
    return;
  stopping_ = true;
  wake();
  thread_.join();
}

void Rewalker::wake() {
  uint64_t one = 1;
  if (write(event_.get(), &one, sizeof(one)) < 0) {
    // Full counter (never in practice): the thread is awake anyway.
  }
}

void Rewalker::installed() {
  install_due_ = true;
  wake();
}

void Rewalker::on_request(const uw_request &r) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(r);
  }
  request_due_ |= pass_on_request_;
  uint64_t one = 1;
  if (requested_ && write(requested_.get(), &one, sizeof(one)) < 0) {
    // Full counter (never in practice): the taker is awake anyway.
  }
}

std::vector<uw_request> Rewalker::take_requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(requests_, {});
}

void Rewalker::run() {
  PriorityBoost boost(kBurstNice);
  uint64_t last = 0, pass_cpu = 0;
  // After a stop signal no pass is due: the window is closed.
  while (!stopping_ && !stop_requested()) {
    // Due: now, or once the gap since the last pass is over.
    uint64_t gap = request_due_   ? kRequestGapNs
                   : install_due_ ? kInstallGapNs
                                  : 0;
    if (gap)
      gap = std::max(gap, std::min(kMaxGapNs, pass_cpu * kGapPerPassCpu));
    int timeout_ms = -1;
    if (gap) {
      const uint64_t now = monotonic_ns();
      if (now - last >= gap) {
        request_due_ = false;
        install_due_ = false;
        // Threads left for later: their processes' maps change for a few
        // ms (an exit, an exec), so after the longer gap.
        const uint64_t cpu0 = thread_cpu_ns();
        if (pass_())
          install_due_ = true;
        pass_cpu = thread_cpu_ns() - cpu0;
        passes_++;
        cpu_ns_ += pass_cpu;
        last = monotonic_ns();
        continue;
      }
      timeout_ms = static_cast<int>((last + gap - now + 999999) / 1000000);
    }
    epoll_event evs[2];
    int n = epoll_wait(epoll_.get(), evs, 2, timeout_ms);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u32 == 1) {
        ring_buffer__consume(ring_.get());
      } else {
        uint64_t count;
        if (read(event_.get(), &count, sizeof(count)) < 0) {
          // Nothing pending: another wake-up read it.
        }
      }
    }
  }
}

} // namespace offcpu
