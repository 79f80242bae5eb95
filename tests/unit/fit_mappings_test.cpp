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

// A file left for when a walk reaches it keeps a slot of its own between
// mappings without tables: the walker tells it apart (it asks for the
// file), where a mapping without a table is walked by frame pointers.
TEST(FitMappings, DeferredFilesKeepTheirOwnSlots) {
  std::vector<uw_mapping> maps = {
      table(0x400000, 0x10000, 1),
      {0x7f0000000000, 0x7f0000010000, 0, UW_FILE_DEFERRED, 0},
      none(0x7f0000010000, kPage),
      {0x7f0000020000, 0x7f0000030000, 0, UW_FILE_DEFERRED, 0},
  };
  MappingFit fit = fit_mappings(maps);
  ASSERT_EQ(maps.size(), 4u);
  EXPECT_EQ(slot_of(maps, 0x7f0000000100)->file, UW_FILE_DEFERRED);
  EXPECT_EQ(slot_of(maps, 0x7f0000010100)->file, UW_FILE_NONE);
  EXPECT_EQ(slot_of(maps, 0x7f0000020100)->file, UW_FILE_DEFERRED);
  EXPECT_EQ(fit.demoted, 0u);
}

Mapping mapped(uint64_t start, uint64_t end, std::string path) {
  Mapping m;
  m.start = start;
  m.end = end;
  m.executable = true;
  m.path = std::move(path);
  return m;
}

// Deferring files (whole-system runs): the program, the C library and the
// loader get their tables at the install; any other file once a walk has
// reached an address in it.
TEST(TableAtInstall, TheProgramTheRuntimeAndFilesAWalkReached) {
  const std::string program = "/usr/sbin/server";
  const std::vector<uint64_t> none_asked;
  EXPECT_TRUE(
      table_at_install(mapped(0x1000, 0x2000, program), program, none_asked));
  for (const char *runtime :
       {"/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "/lib/ld-musl-x86_64.so.1", "/lib/x86_64-linux-gnu/libc-2.31.so",
        "/lib/x86_64-linux-gnu/libpthread.so.0"})
    EXPECT_TRUE(table_at_install(
        mapped(0x7f0000000000, 0x7f0000100000, runtime), program, none_asked))
        << runtime;
  const Mapping crypto = mapped(0x7f0000200000, 0x7f0000300000,
                                "/usr/lib/x86_64-linux-gnu/libcrypto.so.3");
  EXPECT_FALSE(table_at_install(crypto, program, none_asked));
  // libcurl is not the C library, whatever its name starts with.
  EXPECT_FALSE(table_at_install(
      mapped(0x7f0000400000, 0x7f0000500000, "/usr/lib/libcurl.so.4"), program,
      none_asked));
  EXPECT_TRUE(table_at_install(crypto, program, {0x7f0000200000}));
  EXPECT_TRUE(table_at_install(crypto, program, {0x1234, 0x7f00002fffff}));
  EXPECT_FALSE(table_at_install(crypto, program, {0x7f0000300000}));
}

} // namespace
} // namespace offcpu
