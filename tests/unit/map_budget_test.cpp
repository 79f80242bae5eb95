// The map sizes a run picks when none are given, and the share of them kept
// for the stop pass, from what the machine reports.
#include <gtest/gtest.h>

#include "collect/map_budget.h"
#include "offcpu/shared.h"
#include "support/fake_files.h"

namespace offcpu {
namespace {

constexpr uint64_t kCountsItem = sizeof(offcpu_key) + sizeof(offcpu_value);

test::FakeFiles with_available_kib(uint64_t kib) {
  test::FakeFiles f;
  f.files["/proc/meminfo"] = "MemTotal:       99999999 kB\n"
                             "MemAvailable:   " +
                             std::to_string(kib) + " kB\n";
  return f;
}

TEST(MapBudget, DefaultsGrowWithAvailableMemoryUpToTheirCeilings) {
  // 24 GB available: the cap is 1 GiB, a twelfth of it holds 65,536 stacks.
  auto big = with_available_kib(24u << 20);
  EXPECT_EQ(default_stack_storage(big), 65536u);
  EXPECT_EQ(default_max_entries(kCountsItem, big), 262144u);
  // 2 GiB: a cap of 256 MiB. A key takes 288 bytes with its latency
  // histogram (64 key, 160 value, 64 the kernel's): 65,536 of them fit a
  // twelfth of it, 131,072 (37.7 MB) do not. A stack takes 336 bytes and
  // a quarter of a deep one's 1,096: 32,768 fit (20 MB), 65,536 do not.
  static_assert(kCountsItem == 224);
  auto mid = with_available_kib(2u << 20);
  EXPECT_EQ(default_stack_storage(mid), 32768u);
  EXPECT_EQ(default_max_entries(kCountsItem, mid), 65536u);
  // 256 MiB: 32 MiB of maps at most.
  auto small = with_available_kib(256u << 10);
  EXPECT_EQ(default_stack_storage(small), 4096u);
  // Whatever the machine, at least the floor (the budget check then says
  // whether it fits).
  auto tiny = with_available_kib(1024);
  EXPECT_EQ(default_stack_storage(tiny), 1024u);
  EXPECT_EQ(default_max_entries(kCountsItem, tiny), 4096u);
  // Unknown memory: the 1 GiB cap.
  test::FakeFiles none;
  EXPECT_EQ(default_stack_storage(none), 65536u);
  // What the defaults pick always passes the budget check.
  for (auto *f : {&big, &mid, &small}) {
    MapDemand d{default_stack_storage(*f), default_max_entries(kCountsItem, *f),
                kCountsItem};
    EXPECT_NO_THROW(check_map_budget(d, *f));
  }
}

// Stacks over OFFCPU_SHORT_STACK_DEPTH frames go to a map a quarter the
// size of the short stacks' (bpf/stack_store.bpf.h); the budget counts both.
TEST(MapBudget, DeepStacksHaveAQuarterOfTheStorage) {
  EXPECT_EQ(deep_stack_storage(65536), 16384u);
  EXPECT_EQ(deep_stack_storage(1024), 256u);
  EXPECT_EQ(deep_stack_storage(200), 64u); // at least 64
  EXPECT_EQ(deep_stack_storage(10), 10u);  // or all
  const uint64_t item = 8 + 64;            // key, the kernel's element overhead
  EXPECT_EQ(map_bytes({65536, 0, 0}),
            65536 * (item + sizeof(offcpu_short_stack)) +
                16384 * (item + sizeof(offcpu_stack)));
  // Under 60% of what one map of whole stacks took.
  EXPECT_LT(map_bytes({65536, 0, 0}) * 5,
            65536 * (item + sizeof(offcpu_stack)) * 3);
}

TEST(MapBudget, TheStopPassKeepsTwoEntriesPerThreadWithinBounds) {
  test::FakeFiles f;
  f.files["/proc/loadavg"] = "0.00 0.01 0.05 1/345 6789\n";
  EXPECT_EQ(stop_pass_reserve(4096, f), 690u);
  EXPECT_EQ(stop_pass_reserve(65536, f), 8192u); // at least an eighth
  EXPECT_EQ(stop_pass_reserve(1024, f), 512u);   // at most half
  EXPECT_EQ(stop_pass_reserve(2, f), 1u);
  EXPECT_EQ(stop_pass_reserve(1, f), 0u);
  // Unreadable or malformed: an eighth.
  test::FakeFiles none;
  EXPECT_EQ(stop_pass_reserve(4096, none), 512u);
  f.files["/proc/loadavg"] = "garbage";
  EXPECT_EQ(stop_pass_reserve(4096, f), 512u);
}

} // namespace
} // namespace offcpu
