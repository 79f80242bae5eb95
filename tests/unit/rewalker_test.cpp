#include "collect/rewalker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
