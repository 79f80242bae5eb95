#include "util/signals.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "util/error.h"

namespace offcpu {
namespace {

std::atomic<int> g_stops{0};
constexpr int kCleanupSlots = 32;
std::atomic<const char *> g_cleanup_paths[kCleanupSlots];

void on_stop_signal(int sig) {
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

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
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
  const double deadline = seconds < 0 ? -1 : monotonic_seconds() + seconds;
  while (!stop_requested()) {
    double step = 0.05;
    if (deadline >= 0) {
      double left = deadline - monotonic_seconds();
      if (left <= 0)
        return false;
      if (left < step)
        step = left;
    }
    timespec ts{0, static_cast<long>(step * 1e9)};
    nanosleep(&ts, nullptr);
  }
  return true;
}

} // namespace offcpu
