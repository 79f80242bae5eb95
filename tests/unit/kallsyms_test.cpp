#include <gtest/gtest.h>

#include "offcpu/shared.h"
#include "support/fake_files.h"
#include "symbolize/kallsyms.h"
#include "symbolize/kernel_namer.h"
#include "symbolize/name_samples.h"

#include <unistd.h>

#include <cstdio>
#include <map>

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

// offcpu lock's names for global locks, from /proc/kallsyms as read when
// the BPF namer is unavailable. A kernel built with CONFIG_KALLSYMS_ALL
// lists its variables: a lock is named by the one it lies in. Without it
// (this project's VMs: 35 data symbols) only section markers are listed:
// a lock after one is no part of it and is shown by its address.
TEST(Kallsyms, GlobalLockNamesFromKallsyms) {
  const char all[] = "ffffffff81000000 T _stext\n"
                     "ffffffff82a00000 D __start___bug_table\n"
                     "ffffffff82a10000 d console_sem\n"
                     "ffffffff82a10028 D uts_sem\n"
                     "ffffffff82a10100 b big_table\n"
                     "ffffffffc0005000 d ext4_li_mtx\t[ext4]\n";
  auto ks = KernelSymbols::parse(all);
  EXPECT_EQ(describe_lock(0xffffffff82a10000, 0, ks, true), "console_sem");
  EXPECT_EQ(describe_lock(0xffffffff82a10030, 0, ks, true), "uts_sem+0x8");
  EXPECT_EQ(describe_lock(0xffffffffc0005008, 0, ks, true),
            "ext4_li_mtx+0x8 [ext4]");
  // Past any variable's plausible end (4 KiB): by address.
  EXPECT_EQ(describe_lock(0xffffffff82a20000, 0, ks, true),
            "[lock 0xffffffff82a20000]");
  // After a section marker: not in it.
  EXPECT_EQ(describe_lock(0xffffffff82a00040, 0, ks, true),
            "[lock 0xffffffff82a00040]");
  // offcpu rwsem's layout: the bare address.
  EXPECT_EQ(describe_lock(0xffffffff82a00040, 0, ks, false),
            "0xffffffff82a00040");
  // The waiter's own mmap_lock needs no symbol.
  EXPECT_EQ(describe_lock(0xffff888012345678, RWSEM_LOCK_IS_MMAP, ks, true),
            "mmap_lock");
  // No CONFIG_KALLSYMS_ALL: markers only, as on Linux 6.18 here.
  const char markers[] = "ffffffff81000000 T _stext\n"
                         "ffffffff82860960 D __start_ro_after_init\n"
                         "ffffffff83000000 D __start_init_stack\n"
                         "ffffffff83229a08 D __start_once\n"
                         "ffffffff83780000 B __init_begin\n";
  auto bare = KernelSymbols::parse(markers);
  for (uint64_t lock : {0xffffffff82860968ull, 0xffffffff83000100ull,
                        0xffffffff83229a10ull, 0xffffffff83780010ull}) {
    char want[64];
    snprintf(want, sizeof(want), "[lock 0x%llx]",
             static_cast<unsigned long long>(lock));
    EXPECT_EQ(describe_lock(lock, 0, bare, true), want);
  }
  // The same names come from the kernel's own printing (the BPF namer).
  auto printed = KernelSymbols::from_printed(
      {{0xffffffff82a10000, "console_sem+0x0/0x28", true},
       {0xffffffff83229a10, "__start_once+0x8/0x10", true}});
  EXPECT_EQ(describe_lock(0xffffffff82a10000, 0, printed, true), "console_sem");
  EXPECT_EQ(describe_lock(0xffffffff83229a10, 0, printed, true),
            "[lock 0xffffffff83229a10]");
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

TEST(Kallsyms, FromPrintedSymbols) {
  auto ks = KernelSymbols::from_printed(
      {{0xffffffff81003010, "schedule+0x10/0x90"},
       {0xffffffff81003400, "__schedule+0x0/0x1690"},
       {0xffffffffc0001044, "nfs_wait+0x44/0x80 [nfs]"},
       {0xffffffffc0009999, "0xffffffffc0009999"},       // unknown address
       {0xffffffff81000010, "broken+0x20/0x10"},         // offset past it
       {0xffffffff81000020, "no_offset"},                // not %pS
       {0xffffffff81000030, "bad+0xzz/0x10"},            // not hex
       {0xffffffff81000040, "unclosed+0x1/0x10 [mod"},   // bad module
       {0xffffffff82001008, "uts_sem+0x8/0x28", true}}); // a lock
  auto s = ks.find(0xffffffff8100301f);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "schedule");
  EXPECT_EQ(s->addr, 0xffffffff81003000u);
  s = ks.find(0xffffffff81003400);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "__schedule");
  s = ks.find(0xffffffffc0001043);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "nfs_wait");
  EXPECT_EQ(s->module, "nfs");
  EXPECT_EQ(ks.size(), 3u);
  s = ks.find_data(0xffffffff82001010);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "uts_sem");
}

// The kernel's %pS names, through the BPF namer, must be the names
// /proc/kallsyms gives, for a few hundred real code addresses.
TEST(Kallsyms, KernelNamerAgreesWithKallsyms) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to run the BPF naming program";
  auto all = KernelSymbols::load(system_files());
  if (all.size() == 0 || all.addresses_hidden())
    GTEST_SKIP() << "/proc/kallsyms unreadable or hidden";
  auto text = system_files().read("/proc/kallsyms", 256u << 20);
  ASSERT_TRUE(text);
  std::vector<uint64_t> addrs;
  std::multimap<uint64_t, std::string> names_at; // aliases share an address
  size_t line = 0, pos = 0;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos)
      break;
    std::string l = text->substr(pos, nl - pos);
    pos = nl + 1;
    if (l.size() < 20 || (l[17] != 'T' && l[17] != 't'))
      continue;
    // BPF programs' and trampolines' symbols come and go with the programs
    // other tests (or tools) load while this one runs.
    if (l.find("[bpf]") != std::string::npos)
      continue;
    uint64_t addr = std::stoull(l.substr(0, 16), nullptr, 16);
    std::string name = l.substr(19, l.find_first_of(" \t", 19) - 19);
    names_at.emplace(addr, name);
    // Every 397th text symbol, a few bytes in (as a return address is).
    if (++line % 397 == 0)
      addrs.push_back(addr + 5);
  }
  ASSERT_GT(addrs.size(), 100u);
  std::string why;
  auto named = name_kernel_addresses(addrs, &why);
  if (!named)
    GTEST_SKIP() << "no BPF namer on this kernel: " << why;
  for (uint64_t a : addrs) {
    auto want = all.find(a), got = named->find(a);
    ASSERT_TRUE(want && got) << std::hex << a;
    EXPECT_EQ(got->addr, want->addr) << std::hex << a;
    EXPECT_EQ(got->module, want->module) << std::hex << a;
    bool known = false;
    auto range = names_at.equal_range(got->addr);
    for (auto it = range.first; it != range.second; ++it)
      known |= it->second == got->name;
    EXPECT_TRUE(known) << got->name << " at " << std::hex << a;
  }
}

} // namespace
} // namespace offcpu
