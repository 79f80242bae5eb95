// DwarfFile::release (issue #27, peak memory): libdw's sections are freed,
// the answers given so far stay, and an address not asked before opens the
// file again; the loader's thread holds its files' sections up to a budget,
// the least recently used let go past it. Read from this test binary's own
// DWARF (built with -g).
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbolize/dwarf_lines.h"
#include "symbolize/dwarf_loader.h"
#include "util/clock.h"
#include "util/fd.h"

namespace offcpu {
namespace {

__attribute__((noinline)) int release_probe_first(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

__attribute__((noinline)) int release_probe_second(int x) {
  asm volatile("" ::: "memory");
  return x * 5 + 2;
}

// The function's address as this executable's ELF file numbers it.
uint64_t file_vaddr(void *fn) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fbase)
    return 0;
  auto *ehdr = static_cast<const Elf64_Ehdr *>(info.dli_fbase);
  const auto addr = reinterpret_cast<uintptr_t>(fn);
  return ehdr->e_type == ET_EXEC
             ? addr
             : addr - reinterpret_cast<uintptr_t>(info.dli_fbase);
}

// This test binary's two probes as the file numbers them, and a loader fed
// the binary itself, holding `held` bytes of sections (0: one file).
struct LoaderOfThisBinary {
  explicit LoaderOfThisBinary(uint64_t held = 0) : loader(held) {}
  const uint64_t first =
      file_vaddr(reinterpret_cast<void *>(&release_probe_first));
  const uint64_t second =
      file_vaddr(reinterpret_cast<void *>(&release_probe_second));
  DwarfLoader loader;

  DwarfLoader::Ticket submit(const char *path = "/proc/self/exe") {
    return loader.submit(UniqueFd(open(path, O_RDONLY | O_CLOEXEC)));
  }
  // A file submitted with one address, and served.
  DwarfLoader::Ticket submit_served(uint64_t vaddr,
                                    const char *path = "/proc/self/exe") {
    const DwarfLoader::Ticket t = submit(path);
    loader.warm(t, vaddr);
    EXPECT_TRUE(settle()) << "the loader did not finish in 30 s";
    return t;
  }
  // The files of `tickets`, taken; null where one could not be.
  std::vector<std::unique_ptr<DwarfFile>>
  take_all(const std::vector<DwarfLoader::Ticket> &tickets) {
    std::vector<std::unique_ptr<DwarfFile>> out;
    for (DwarfLoader::Ticket t : tickets) {
      DwarfLoss why = DwarfLoss::None;
      out.push_back(loader.take(t, 0, &why));
      EXPECT_TRUE(out.back()) << "loss " << static_cast<int>(why);
    }
    return out;
  }
  // Until the loader's thread has served every address asked (30 s at most).
  bool settle() {
    for (int i = 0; i < 3000 && loader.pending() > 0; i++)
      usleep(10000);
    return loader.pending() == 0;
  }
};

std::string holder(const std::vector<SourceFrame> &chain) {
  return chain.empty() || !chain.front().function ? std::string()
                                                  : *chain.front().function;
}

size_t heap_bytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

TEST(DwarfRelease, FreesLibdwKeepsAnswersAndReopensForNewAddresses) {
  ASSERT_EQ(release_probe_first(1) + release_probe_second(1), 11);
  UniqueFd fd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  DwarfLoss why = DwarfLoss::None;
  auto dwarf = DwarfFile::open_fd(fd.get(), DwarfLimits{}, nullptr, 0, &why);
  ASSERT_TRUE(dwarf) << "no DWARF in the test binary, loss "
                     << static_cast<int>(why);
  const uint64_t first =
      file_vaddr(reinterpret_cast<void *>(&release_probe_first));
  const uint64_t second =
      file_vaddr(reinterpret_cast<void *>(&release_probe_second));
  ASSERT_NE(first, 0u);
  ASSERT_NE(second, 0u);

  const std::string named = holder(dwarf->frames_at(first));
  ASSERT_NE(named.find("release_probe_first"), std::string::npos) << named;

  // The sections libdw read (this binary's DWARF is megabytes) go.
  const size_t held = heap_bytes();
  dwarf->release();
  const size_t freed = held - std::min(held, heap_bytes());
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator is not glibc's: mallinfo2 sees none of it.
  (void)freed;
#else
  EXPECT_GT(freed, size_t{1} << 20) << "release() freed " << freed << " bytes";
#endif

  EXPECT_EQ(holder(dwarf->frames_at(first)), named); // answered before
  const std::string reopened = holder(dwarf->frames_at(second));
  EXPECT_NE(reopened.find("release_probe_second"), std::string::npos)
      << reopened;
  EXPECT_EQ(dwarf->loss(), DwarfLoss::None);
  EXPECT_EQ(dwarf->reopens(), 1u);
  EXPECT_FALSE(dwarf->released());
}

// The loader's thread holds one file's sections at a time: warming a
// second file frees the first's, and the first, taken later, still has
// its warmed answers and opens again for a new address.
TEST(DwarfRelease, LoaderHoldsOneFileAtATime) {
  ASSERT_EQ(release_probe_first(2) + release_probe_second(2), 19);
  LoaderOfThisBinary p;
  DwarfLoader &loader = p.loader;
  const uint64_t first = p.first, second = p.second;
  auto submit = [&] { return p.submit(); };
  const DwarfLoader::Ticket a = submit();
  loader.warm(a, first);
  const DwarfLoader::Ticket b = submit();
  loader.warm(b, second);
  ASSERT_TRUE(p.settle()) << "the loader did not finish in 30 s";
  DwarfLoss why = DwarfLoss::None;
  auto fa = loader.take(a, 0, &why);
  ASSERT_TRUE(fa) << static_cast<int>(why);
  auto fb = loader.take(b, 0, &why);
  ASSERT_TRUE(fb) << static_cast<int>(why);
  EXPECT_TRUE(fa->released());  // let go when the thread turned to b
  EXPECT_FALSE(fb->released()); // the last one held
  EXPECT_EQ(fa->reopens(), 0u);
  EXPECT_NE(holder(fa->frames_at(first)).find("release_probe_first"),
            std::string::npos); // answered before, not read again
  EXPECT_EQ(fa->reopens(), 0u);
  EXPECT_NE(holder(fa->frames_at(second)).find("release_probe_second"),
            std::string::npos);
  EXPECT_EQ(fa->reopens(), 1u);
}

// A file's DWARF sections, and the compressed ones' inflated size.
struct DwarfSizes {
  uint64_t bytes = 0, inflated = 0;
};
DwarfSizes dwarf_sizes(const char *path) {
  DwarfLoss why = DwarfLoss::None;
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  auto f = DwarfFile::open_fd(fd.get(), DwarfLimits{}, nullptr, 0, &why);
  return f ? DwarfSizes{f->section_bytes(), f->inflated_bytes()} : DwarfSizes{};
}

// Within its budget the thread keeps the files it used last (glibc's debug
// file was read again three times in 8 s of a server load when a small
// file's addresses made the thread let it go, issue #27); past it, the
// least recently used one goes.
TEST(DwarfRelease, LoaderLetsTheLeastRecentlyUsedGoPastItsBudget) {
  ASSERT_EQ(release_probe_first(2) + release_probe_second(2), 19);
  const uint64_t bytes = dwarf_sizes("/proc/self/exe").bytes;
  ASSERT_GT(bytes, 0u);
  LoaderOfThisBinary p(bytes * 5 / 2); // room for two files and a half
  const DwarfLoader::Ticket a = p.submit_served(p.first);
  const DwarfLoader::Ticket b = p.submit_served(p.second);
  // a, the least recently used, let go for c
  const DwarfLoader::Ticket c = p.submit_served(p.first);
  for (uint64_t i = 1; i <= 300; i++)
    p.loader.warm(a, p.first + i);
  ASSERT_TRUE(p.settle()); // a read again for its 300: b, the oldest, goes
  auto f = p.take_all({a, b, c});
  ASSERT_TRUE(f[0] && f[1] && f[2]);
  EXPECT_EQ(f[0]->reopens(), 1u);
  EXPECT_FALSE(f[0]->released());
  EXPECT_TRUE(f[1]->released());
  EXPECT_FALSE(f[2]->released()); // held all along: never read again
  EXPECT_NE(holder(f[2]->frames_at(p.second)).find("release_probe_second"),
            std::string::npos);
  EXPECT_EQ(f[2]->reopens(), 0u);
}

// Past its budget the thread lets go first of a file read again cheaply
// (plain sections) and keeps one whose sections it would inflate again.
TEST(DwarfRelease, LoaderKeepsACompressedFileOverPlainOnes) {
  ASSERT_EQ(release_probe_first(2) + release_probe_second(2), 19);
  const DwarfSizes gz = dwarf_sizes(FIXTURE_GZ);
  const DwarfSizes self = dwarf_sizes("/proc/self/exe");
  ASSERT_GT(gz.bytes, 0u) << FIXTURE_GZ << " has no DWARF";
  if (gz.inflated == 0)
    GTEST_SKIP() << "the toolchain left " << FIXTURE_GZ
                 << "'s DWARF uncompressed (no -gz=zlib)";
  ASSERT_GT(self.bytes, 0u);
  ASSERT_EQ(self.inflated, 0u);
  {
    // Room for the compressed file and half of this binary: the thread
    // lets go of this binary once done with it (postgres's case: glibc's
    // debug file beside a plain libpython).
    LoaderOfThisBinary p(gz.bytes + self.bytes / 2);
    const DwarfLoader::Ticket a = p.submit_served(0x1000, FIXTURE_GZ);
    const DwarfLoader::Ticket b = p.submit_served(p.first);
    auto f = p.take_all({a, b});
    ASSERT_TRUE(f[0] && f[1]);
    EXPECT_FALSE(f[0]->released());
    EXPECT_TRUE(f[1]->released());
    EXPECT_NE(holder(f[1]->frames_at(p.first)).find("release_probe_first"),
              std::string::npos); // warmed before it was let go
    EXPECT_EQ(f[1]->reopens(), 0u);
  }
  // Room for the compressed file and one and a half of this binary: b let
  // go for c, not a, the least recently used.
  LoaderOfThisBinary p(gz.bytes + self.bytes * 3 / 2);
  const DwarfLoader::Ticket a = p.submit_served(0x1000, FIXTURE_GZ);
  const DwarfLoader::Ticket b = p.submit_served(p.first);
  const DwarfLoader::Ticket c = p.submit_served(p.second);
  auto f = p.take_all({a, b, c});
  ASSERT_TRUE(f[0] && f[1] && f[2]);
  EXPECT_FALSE(f[0]->released());
  EXPECT_TRUE(f[1]->released());
  EXPECT_FALSE(f[2]->released());
}

// A file let go is not read again for every address that comes in while
// the window is open (issue #27: 78 reopenings of 10 files, a third of
// offcpu's CPU): a few addresses wait for its taker, who reads it once;
// enough of them (256) pay for one reopening by the thread.
TEST(DwarfRelease, LoaderReopensALetGoFileOnlyForManyAddresses) {
  ASSERT_EQ(release_probe_first(2) + release_probe_second(2), 19);
  LoaderOfThisBinary p;
  DwarfLoader &loader = p.loader;
  const uint64_t first = p.first, second = p.second;
  auto submit = [&] { return p.submit(); };
  auto settle = [&] {
    ASSERT_TRUE(p.settle()) << "the loader did not finish in 30 s";
  };
  const DwarfLoader::Ticket a = submit();
  loader.warm(a, first);
  const DwarfLoader::Ticket b = submit();
  loader.warm(b, second);
  settle(); // a let go for b
  for (uint64_t i = 1; i <= 8; i++)
    loader.warm(a, first + i);
  const DwarfLoader::Ticket c = submit();
  loader.warm(c, first);
  settle();
  for (uint64_t i = 1; i <= 300; i++)
    loader.warm(b, second + i);
  settle(); // b let go for c, then read again for its 300
  DwarfLoss why = DwarfLoss::None;
  auto fa = loader.take(a, 0, &why);
  ASSERT_TRUE(fa) << static_cast<int>(why);
  auto fb = loader.take(b, 0, &why);
  ASSERT_TRUE(fb) << static_cast<int>(why);
  auto fc = loader.take(c, 0, &why);
  ASSERT_TRUE(fc) << static_cast<int>(why);
  EXPECT_EQ(fa->reopens(), 0u) << "8 addresses did not wait for the taker";
  EXPECT_EQ(fb->reopens(), 1u) << "300 addresses were not warmed";
  // The taker reads a once for what waited.
  for (uint64_t i = 1; i <= 8; i++)
    fa->frames_at(first + i);
  EXPECT_EQ(fa->reopens(), 1u);
  EXPECT_EQ(fa->loss(), DwarfLoss::None);
}

// A file taken while its addresses are still queued to warm leaves a
// ticket with no entry behind: the thread skips it and serves the next
// file (it once threw std::out_of_range there and took offcpu down).
TEST(DwarfRelease, LoaderGoesOnAfterAFileIsTakenMidWarming) {
  ASSERT_EQ(release_probe_first(2) + release_probe_second(2), 19);
  LoaderOfThisBinary p;
  DwarfLoader &loader = p.loader;
  const uint64_t first = p.first, second = p.second;
  auto submit = [&] { return p.submit(); };
  const DwarfLoader::Ticket a = submit();
  loader.warm(a, first);
  ASSERT_TRUE(p.settle()) << "the loader did not finish in 30 s";
  for (uint64_t i = 1; i < 60000; i++) // opened: warmed in batches
    loader.warm(a, first + i);
  DwarfLoss why = DwarfLoss::None;
  ASSERT_TRUE(loader.take(a, 0, &why)) << static_cast<int>(why);
  const DwarfLoader::Ticket b = submit();
  loader.warm(b, second);
  const uint64_t deadline = monotonic_ns() + 30'000'000'000ull;
  auto fb = loader.take(b, deadline, &why);
  ASSERT_TRUE(fb) << "the loader's thread stopped serving, loss "
                  << static_cast<int>(why);
  EXPECT_NE(holder(fb->frames_at(second)).find("release_probe_second"),
            std::string::npos);
}

// Without --lines or pprof, frames are named by function alone: the line
// tables are not read (limits.lines off), and the loader opens its files
// so once told.
TEST(DwarfLines, FunctionsWithoutLineTablesWhenNoOneWantsLines) {
  ASSERT_EQ(release_probe_first(3) + release_probe_second(3), 27);
  LoaderOfThisBinary p;
  DwarfLimits no_lines;
  no_lines.lines = false;
  p.loader.set_limits(no_lines);
  const DwarfLoader::Ticket t = p.submit();
  DwarfLoss why = DwarfLoss::None;
  auto bare = p.loader.take(t, 0, &why);
  ASSERT_TRUE(bare) << static_cast<int>(why);
  const auto &chain = bare->frames_at(p.first);
  ASSERT_FALSE(chain.empty());
  EXPECT_NE(holder(chain).find("release_probe_first"), std::string::npos);
  for (const SourceFrame &f : chain) {
    EXPECT_EQ(f.file, nullptr);
    EXPECT_EQ(f.decl_file, nullptr);
    EXPECT_EQ(f.line, 0u);
  }
  // The same file with lines: the leaf's file and line are there.
  UniqueFd fd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  auto full = DwarfFile::open_fd(fd.get(), DwarfLimits{}, nullptr, 0, &why);
  ASSERT_TRUE(full);
  const auto &lined = full->frames_at(p.first);
  ASSERT_FALSE(lined.empty());
  EXPECT_NE(lined.back().file, nullptr);
  EXPECT_GT(lined.back().line, 0u);
}

} // namespace
} // namespace offcpu
