#include "collect/rewalker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

namespace offcpu {
namespace {

// Waits up to 2 s for `count` to reach `n`.
bool reaches(const std::atomic<int> &count, int n) {
  for (int i = 0; i < 2000 && count.load() < n; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return count.load() >= n;
}

TEST(Rewalker, PassesOnlyWhenTablesWereInstalled) {
  std::atomic<int> passes{0};
  Rewalker r(
      -1, [&] { return ++passes, false; }, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(passes.load(), 0) << "nothing asked for a pass";
  r.installed();
  EXPECT_TRUE(reaches(passes, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(passes.load(), 1) << "one install, one pass";
}

TEST(Rewalker, PassesAgainWhileThreadsAreLeftForLater) {
  std::atomic<int> passes{0};
  // The first two passes leave threads behind (their maps were changing).
  Rewalker r(
      -1, [&] { return ++passes < 3; }, true);
  r.installed();
  EXPECT_TRUE(reaches(passes, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(passes.load(), 3);
}

TEST(Rewalker, InstallsCloseTogetherShareAPass) {
  std::atomic<int> passes{0};
  Rewalker r(
      -1, [&] { return ++passes, false; }, true);
  r.installed();
  EXPECT_TRUE(reaches(passes, 1));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; i++)
    r.installed();
  EXPECT_TRUE(reaches(passes, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  // At most one pass per 3 ms gap after the first.
  EXPECT_LE(passes.load(), 2 + static_cast<int>(ms / 3) + 1);
}

// Burns `ms` of this thread's CPU time (a pass over thousands of tasks).
void burn_cpu_ms(double ms) {
  timespec t0{}, t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  do
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  while (static_cast<double>(t.tv_sec - t0.tv_sec) * 1e3 +
             static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e6 <
         ms);
}

// Costly passes asked for all the time (installs every ms) are spaced by
// nine times their CPU: a tenth of a CPU at most, not one pass per 3 ms.
TEST(Rewalker, CostlyPassesAreSpacedByTheirCost) {
  std::atomic<int> passes{0};
  Rewalker r(
      -1, [&] { return burn_cpu_ms(2), ++passes, false; }, true);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 400; i++) {
    r.installed();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.stop();
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  EXPECT_GE(passes.load(), 2) << "passes still run";
  // Each pass is 2 ms of CPU, then an 18 ms gap (3 ms without the bound).
  EXPECT_LE(passes.load(), static_cast<int>(ms / 20) + 2)
      << "in " << ms << " ms";
  EXPECT_GE(r.stats().cpu_ns, uint64_t{2000000} * passes.load());
}

TEST(Rewalker, NoPassAfterStop) {
  std::atomic<int> passes{0};
  Rewalker r(
      -1, [&] { return ++passes, true; }, true);
  r.installed();
  EXPECT_TRUE(reaches(passes, 1));
  r.stop();
  int after = passes.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(passes.load(), after);
  r.installed(); // harmless once stopped
  r.stop();
  EXPECT_EQ(passes.load(), after);
  EXPECT_TRUE(r.take_requests().empty());
}

} // namespace
} // namespace offcpu
