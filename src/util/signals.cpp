#include "util/signals.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "util/clock.h"
#include "util/error.h"

namespace offcpu {
namespace {

std::atomic<int> g_stops{0};
std::atomic<int> g_stop_signal{0};
std::atomic<uint64_t> g_stop_ns{0};
std::atomic<volatile uint64_t *> g_window_end{nullptr};

// clock_gettime is async-signal-safe (monotonic_ns may not be declared so).
uint64_t now_in_handler() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}
constexpr int kCleanupSlots = 32;
std::atomic<const char *> g_cleanup_paths[kCleanupSlots];

void on_stop_signal(int sig) {
  int none = 0;
  if (g_stop_signal.compare_exchange_strong(none, sig)) {
    const uint64_t now = now_in_handler();
    g_stop_ns.store(now);
    // The window closes now: waits ending later are charged up to here and
    // none opens (a planned end already earlier stays).
    if (volatile uint64_t *end = g_window_end.load())
      if (*end == 0 || *end > now)
        *end = now;
  }
  if (g_stops.fetch_add(1) >= 1 && sig == SIGINT) {
    for (auto &slot : g_cleanup_paths)
      if (const char *path = slot.load())
        unlink(path);
    static const char msg[] = "offcpu: interrupted again, exiting\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(kExitInterrupted);
  }
}

} // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed stdout shows up as EPIPE from write(), handled where we write.
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() {
  return g_stops.load() > 0;
}

int stop_signal() {
  return g_stop_signal.load();
}

uint64_t stop_signal_ns() {
  return g_stop_ns.load();
}

WindowEndOnSignal::WindowEndOnSignal(volatile uint64_t *word) {
  g_window_end.store(word);
  // A signal before the registration: close the window at its time now.
  if (uint64_t at = stop_signal_ns())
    if (*word == 0 || *word > at)
      *word = at;
}

WindowEndOnSignal::~WindowEndOnSignal() {
  g_window_end.store(nullptr);
}

int add_cleanup_path(const char *path) {
  for (int i = 0; i < kCleanupSlots; i++) {
    const char *expected = nullptr;
    if (g_cleanup_paths[i].compare_exchange_strong(expected, path))
      return i;
  }
  return -1;
}

void forget_cleanup_path(int handle) {
  if (handle >= 0 && handle < kCleanupSlots)
    g_cleanup_paths[handle].store(nullptr);
}

bool wait_for_stop(double seconds) {
  const uint64_t deadline =
      seconds < 0 ? 0 : monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (!stop_requested()) {
    uint64_t step = 50000000;
    if (deadline) {
      uint64_t now = monotonic_ns();
      if (now >= deadline)
        return false;
      step = std::min(step, deadline - now);
    }
    timespec ts{0, static_cast<long>(step)};
    nanosleep(&ts, nullptr);
  }
  return true;
}

} // namespace offcpu
