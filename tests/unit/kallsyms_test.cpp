#include <gtest/gtest.h>

#include "support/fake_files.h"
#include "symbolize/kallsyms.h"

namespace offcpu {
namespace {

const char kFixture[] = "ffffffff81000000 T _stext\n"
                        "ffffffff81001000 t do_one\n"
                        "ffffffff81002000 D some_data\n"
                        "ffffffff81003000 T schedule\n"
                        "ffffffff81003400 T __schedule\n"
                        "garbage line\n"
                        "zzzz T bad_address\n"
                        "ffffffffc0001000 t nfs_wait [nfs]\n"
                        "ffffffffc0002000 t nfs_other [nfs]\n";

TEST(Kallsyms, FindsEnclosingSymbol) {
  auto ks = KernelSymbols::parse(kFixture);
  EXPECT_EQ(ks.size(), 6u); // data and garbage skipped
  ASSERT_TRUE(ks.find(0xffffffff81003010));
  EXPECT_EQ(ks.find(0xffffffff81003010)->name, "schedule");
  EXPECT_EQ(ks.find(0xffffffff81003400)->name, "__schedule");
  EXPECT_EQ(ks.find(0xffffffff81000000)->name, "_stext");
  EXPECT_FALSE(ks.find(0xffffffff80000000));
}

TEST(Kallsyms, DataSymbolsForLockNames) {
  auto ks = KernelSymbols::parse(kFixture);
  auto d = ks.find_data(0xffffffff81002010);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name, "some_data");
  EXPECT_FALSE(ks.find_data(0xffffffff81001000));
  EXPECT_FALSE(
      KernelSymbols::parse(kFixture, false).find_data(0xffffffff81002010));
}

TEST(Kallsyms, KeepsModuleNames) {
  auto ks = KernelSymbols::parse(kFixture);
  auto s = ks.find(0xffffffffc0001010);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "nfs_wait");
  EXPECT_EQ(s->module, "nfs");
  EXPECT_TRUE(ks.find(0xffffffff81003010)->module.empty());
}

TEST(Kallsyms, DetectsHiddenAddresses) {
  auto ks =
      KernelSymbols::parse("0000000000000000 T a\n0000000000000000 t b\n");
  EXPECT_TRUE(ks.addresses_hidden());
  EXPECT_EQ(ks.size(), 0u);
  EXPECT_FALSE(KernelSymbols::parse(kFixture).addresses_hidden());
}

TEST(Kallsyms, LinesSplitAcrossChunks) {
  // A reader that hands the file over three bytes at a time.
  struct Dribble : FileReader {
    std::optional<std::string> read(const std::string &,
                                    std::size_t) const override {
      return std::string(kFixture);
    }
    bool read_chunks(
        const std::string &, std::size_t,
        const std::function<void(std::string_view)> &sink) const override {
      std::string_view all(kFixture);
      for (size_t i = 0; i < all.size(); i += 3)
        sink(all.substr(i, 3));
      return true;
    }
  } files;
  auto ks = KernelSymbols::load(files);
  EXPECT_EQ(ks.size(), 6u);
  EXPECT_EQ(ks.find(0xffffffffc0002001)->name, "nfs_other");
}

TEST(Kallsyms, LoadsThroughFileReader) {
  test::FakeFiles files;
  files.files["/proc/kallsyms"] = kFixture;
  EXPECT_EQ(KernelSymbols::load(files).size(), 6u);
  test::FakeFiles empty;
  EXPECT_EQ(KernelSymbols::load(empty).size(), 0u);
}

TEST(Kallsyms, RealKallsymsHasTheScheduler) {
  auto ks = KernelSymbols::load(system_files());
  if (ks.size() == 0 || ks.addresses_hidden())
    GTEST_SKIP() << "/proc/kallsyms unreadable or hidden (needs root)";
  // Every kernel has __schedule: its own address must map back to it.
  auto text = system_files().read("/proc/kallsyms", 256u << 20);
  ASSERT_TRUE(text);
  size_t pos = text->find(" __schedule\n");
  ASSERT_NE(pos, std::string::npos);
  size_t start = text->rfind('\n', pos);
  start = start == std::string::npos ? 0 : start + 1;
  uint64_t addr = std::stoull(text->substr(start, 16), nullptr, 16);
  auto s = ks.find(addr + 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "__schedule");
}

} // namespace
} // namespace offcpu
