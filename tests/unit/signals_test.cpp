// The stop signal's handler closes the window itself: the word registered
// with WindowEndOnSignal (the BPF programs' stop_ns) gets the signal's time
// at once, unless an earlier end was already set. Each case runs in a
// forked child, whose signal state dies with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>

#include "util/signals.h"

namespace offcpu {
namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Runs `body` in a child; its return value (0: passed) is the exit code.
int in_child(const std::function<int()> &body) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(Signals, HandlerClosesTheWindowAtTheSignal) {
  for (int sig : {SIGTERM, SIGINT}) {
    EXPECT_EQ(in_child([sig] {
                install_stop_handlers();
                volatile uint64_t end = 0;
                WindowEndOnSignal window(&end);
                if (stop_requested() || stop_signal_ns() || end)
                  return 1;
                const uint64_t before = now_ns();
                raise(sig);
                const uint64_t after = now_ns();
                if (!stop_requested() || stop_signal() != sig)
                  return 2;
                if (end < before || end > after || end != stop_signal_ns())
                  return 3;
                return 0;
              }),
              0)
        << strsignal(sig);
  }
}

TEST(Signals, EarlierPlannedEndStaysAndLaterOneMovesUp) {
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              volatile uint64_t end = 1; // a planned end long past
              WindowEndOnSignal window(&end);
              raise(SIGTERM);
              return end == 1 ? 0 : 1;
            }),
            0);
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              volatile uint64_t end = now_ns() + 3600000000000ull; // in 1 h
              WindowEndOnSignal window(&end);
              raise(SIGTERM);
              return end == stop_signal_ns() ? 0 : 1;
            }),
            0);
}

TEST(Signals, SignalBeforeTheRegistrationStillClosesIt) {
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              raise(SIGTERM);
              volatile uint64_t end = 0;
              WindowEndOnSignal window(&end);
              return end && end == stop_signal_ns() ? 0 : 1;
            }),
            0);
}

TEST(Signals, NoWordWrittenAfterTheRegistrationEnds) {
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              volatile uint64_t end = 0;
              { WindowEndOnSignal window(&end); }
              raise(SIGTERM);
              return end == 0 && stop_signal_ns() ? 0 : 1;
            }),
            0);
}

} // namespace
} // namespace offcpu
