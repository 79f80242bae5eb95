#include "util/signals.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "util/error.h"

namespace offcpu {
namespace {

std::atomic<int> g_stops{0};
std::atomic<const char *> g_cleanup_path{nullptr};

void on_stop_signal(int sig) {
  if (g_stops.fetch_add(1) >= 1 && sig == SIGINT) {
    if (const char *path = g_cleanup_path.load())
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

void set_cleanup_path(const char *path) {
  g_cleanup_path.store(path);
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
