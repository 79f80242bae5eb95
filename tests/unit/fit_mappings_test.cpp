// fit_mappings (src/unwind/unwinder.cpp): a process's executable mappings
// fitted into the UW_MAX_MAPPINGS slots the walker holds (issue #27, bug 4:
// libc, beyond the first 256 by address, had no table).
#include <gtest/gtest.h>

#include "unwind/unwinder.h"

namespace offcpu {
namespace {

constexpr uint64_t kPage = 4096;

uw_mapping table(uint64_t start, uint64_t size, uint32_t file) {
  return {start, start + size, start - 0x1000, file, 0};
}
uw_mapping none(uint64_t start, uint64_t size) {
  return {start, start + size, 0, UW_FILE_NONE, 0};
}

// The slot that holds `pc`, or nullptr.
const uw_mapping *slot_of(const std::vector<uw_mapping> &maps, uint64_t pc) {
  for (const uw_mapping &m : maps)
    if (m.start <= pc && pc < m.end)
      return &m;
  return nullptr;
}

void expect_sorted_within_limit(const std::vector<uw_mapping> &maps) {
  EXPECT_LE(maps.size(), size_t{UW_MAX_MAPPINGS});
  for (size_t i = 1; i < maps.size(); i++)
    EXPECT_LE(maps[i - 1].end, maps[i].start) << i;
}

TEST(FitMappings, FewMappingsAreKeptAsTheyAre) {
  std::vector<uw_mapping> maps{table(0x400000, kPage, 1), none(0x500000, kPage),
                               table(0x7f0000000000, 100 * kPage, 2)};
  const auto before = maps;
  MappingFit fit = fit_mappings(maps);
  ASSERT_EQ(maps.size(), before.size());
  EXPECT_EQ(fit.demoted + fit.spanned, 0u);
  EXPECT_TRUE(fit.ranges.empty());
  for (size_t i = 0; i < maps.size(); i++)
    EXPECT_EQ(maps[i].file, before[i].file);
}

TEST(FitMappings, NeighboursTheWalkCannotTellApartAreMerged) {
  // One file's two contiguous segments (one base), and two adjacent
  // mappings without tables.
  std::vector<uw_mapping> maps{table(0x400000, kPage, 1),
                               table(0x401000, kPage, 1), none(0x500000, kPage),
                               none(0x501000, kPage)};
  maps[1].base = maps[0].base;
  MappingFit fit = fit_mappings(maps);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].end, 0x402000u);
  EXPECT_EQ(maps[1].end, 0x502000u);
  EXPECT_EQ(fit.demoted + fit.spanned, 0u);
}

// The process: the program, 300 small mappings mapped after it
// (below the libraries: mmap works top-down), then libc and the loader.
TEST(FitMappings, TheProgramAndTheLargestCodeKeepTheirTables) {
  std::vector<uw_mapping> maps{table(0x555555554000, kPage, 1)};
  for (uint64_t i = 0; i < 300; i++)
    maps.push_back(table(0x7f0000000000 + i * 4 * kPage, 4 * kPage, 3));
  const uint64_t libc = 0x7f1000000000, ld = 0x7f2000000000;
  maps.push_back(table(libc, 0x180000, 4));
  maps.push_back(table(ld, 0x28000, 5));
  MappingFit fit = fit_mappings(maps);
  expect_sorted_within_limit(maps);
  for (uint64_t pc : {uint64_t{0x555555554100}, libc + 0x1000, ld + 0x100}) {
    const uw_mapping *m = slot_of(maps, pc);
    ASSERT_NE(m, nullptr) << std::hex << pc;
    EXPECT_NE(m->file, UW_FILE_NONE) << std::hex << pc;
  }
  // Every small mapping is still walked (by frame pointers where it lost
  // its table), none left to stop a walk.
  for (uint64_t i = 0; i < 300; i++)
    EXPECT_NE(slot_of(maps, 0x7f0000000000 + i * 4 * kPage + 8), nullptr) << i;
  EXPECT_GT(fit.demoted, 0u);
  EXPECT_EQ(fit.demoted_bytes, fit.demoted * 4 * kPage);
  ASSERT_FALSE(fit.ranges.empty());
  for (const auto &[start, end] : fit.ranges) {
    const uw_mapping *m = slot_of(maps, start);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->file, UW_FILE_NONE);
    EXPECT_EQ(m->end, end);
  }
}

// A hostile process: as many mappings as the kernel allows, tables and
// JIT-like regions interleaved.
TEST(FitMappings, SixtyFiveThousandMappingsFitAndLoseNoAddress) {
  std::vector<uw_mapping> maps;
  for (uint64_t i = 0; i < 65530; i++) {
    uint64_t at = 0x10000000 + i * 2 * kPage; // a page of gap after each
    maps.push_back(i % 3 ? table(at, kPage, 10 + i % 7) : none(at, kPage));
  }
  maps.push_back(table(0x7f1000000000, 0x180000, 4));
  MappingFit fit = fit_mappings(maps);
  expect_sorted_within_limit(maps);
  for (uint64_t i = 0; i < 65530; i += 97)
    EXPECT_NE(slot_of(maps, 0x10000000 + i * 2 * kPage), nullptr) << i;
  const uw_mapping *big = slot_of(maps, 0x7f1000000000);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->file, 4u);
  EXPECT_LE(fit.ranges.size(), size_t{UW_MAX_MAPPINGS});
}

} // namespace
} // namespace offcpu
