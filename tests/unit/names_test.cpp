// Function names as people know them: glibc's symbol versions dropped
// unless two versions would read alike, Rust names demangled (legacy and
// v0), from recorded names and from binaries rustc and libc6-dbg built.
#include <gtest/gtest.h>

#include <unistd.h>

#include <set>

#include "symbolize/demangle.h"
#include "symbolize/elf_file.h"
#include "symbolize/symbol_versions.h"

namespace offcpu {
namespace {

TEST(Demangle, RustLegacyAndV0) {
  EXPECT_EQ(demangle("_ZN12symbols_rust6Widget4make17he9116ae2cc67e199E"),
            "symbols_rust::Widget::make");
  EXPECT_EQ(demangle("_ZN3std6thread5sleep17h2c2a3b1e0f5d4c3bE"),
            "std::thread::sleep");
  EXPECT_EQ(demangle("_RNvMCslo5d6NOwhf9_12symbols_rustNtB2_6Widget4make"),
            "<symbols_rust::Widget>::make");
  EXPECT_EQ(demangle("_RINvCslo5d6NOwhf9_12symbols_rust5twicexEB2_"),
            "symbols_rust::twice::<i64>");
  // C++ and plain C names are unchanged by the Rust path.
  EXPECT_EQ(demangle("_ZN10fixture_ns6Widget4makeEi"),
            "fixture_ns::Widget::make(int)");
  EXPECT_EQ(demangle("_ZN3foo3barE"), "foo::bar");
  EXPECT_EQ(demangle("_Rgarbage"), "_Rgarbage");
  EXPECT_EQ(demangle("main"), "main");
}

std::vector<ElfSymbol> versioned() {
  return {
      {0x100, 134, "clock_nanosleep@@GLIBC_2.17"},
      {0x200, 688, "pthread_cond_wait@@GLIBC_2.3.2"},
      {0x300, 103, "pthread_cond_wait@GLIBC_2.2.5"},
      {0x400, 10, "memcpy@GLIBC_2.2.5"},
      {0x500, 10, "@odd"},
  };
}

TEST(SymbolVersions, PlainNamesUnlessTwoVersionsCollide) {
  auto syms = versioned();
  drop_symbol_versions(syms);
  EXPECT_EQ(syms[0].name, "clock_nanosleep");
  EXPECT_EQ(syms[1].name, "pthread_cond_wait");
  EXPECT_EQ(syms[2].name, "pthread_cond_wait@GLIBC_2.2.5");
  EXPECT_EQ(syms[3].name, "memcpy"); // an old version alone: plain
  EXPECT_EQ(syms[4].name, "@odd");
}

TEST(SymbolVersions, AliasPreference) {
  ElfSymbol local{0x100, 134, "__clock_nanosleep"};
  ElfSymbol old{0x100, 134, "clock_nanosleep@GLIBC_2.2.5"};
  ElfSymbol current{0x100, 134, "clock_nanosleep@@GLIBC_2.17"};
  EXPECT_TRUE(better_alias(current, old));
  EXPECT_TRUE(better_alias(current, local));
  EXPECT_TRUE(better_alias(old, local));
  EXPECT_FALSE(better_alias(old, current));
}

std::set<std::string> demangled_names(const std::string &path) {
  std::set<std::string> out;
  auto elf = ElfFile::open(path);
  if (elf)
    for (const ElfSymbol &s : elf->symbols())
      out.insert(demangle(std::string(s.name)));
  return out;
}

TEST(SymbolVersions, GlibcDebugFileReadsPlain) {
  auto libc = ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(libc);
  const std::string &id = libc->build_id();
  std::string dbg = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                    id.substr(2) + ".debug";
  if (access(dbg.c_str(), R_OK) != 0)
    GTEST_SKIP() << "libc6-dbg not installed (" << dbg << ")";
  auto names = demangled_names(dbg);
  for (const char *plain :
       {"clock_nanosleep", "pthread_cond_signal", "pthread_cond_wait"})
    EXPECT_TRUE(names.count(plain)) << plain;
  // The versions kept for old binaries stay apart from the current ones.
  EXPECT_TRUE(names.count("pthread_cond_wait@GLIBC_2.2.5"));
  for (const std::string &n : names)
    EXPECT_EQ(n.find("@@"), std::string::npos) << n;
}

class RustBinary : public ::testing::TestWithParam<const char *> {};

TEST_P(RustBinary, NamesAreDemangled) {
  if (!*GetParam())
    GTEST_SKIP() << "rustc not installed: recorded names only";
  auto names = demangled_names(GetParam());
  ASSERT_FALSE(names.empty());
  bool make = names.count("<symbols_rust::Widget>::make") ||
              names.count("symbols_rust::Widget::make");
  bool twice = names.count("symbols_rust::twice::<i64>") ||
               names.count("symbols_rust::twice");
  EXPECT_TRUE(make && twice);
  for (const std::string &n : names)
    EXPECT_TRUE(n.rfind("_R", 0) != 0 && n.find("17h") == std::string::npos)
        << "still mangled: " << n;
}

INSTANTIATE_TEST_SUITE_P(LegacyAndV0, RustBinary,
                         ::testing::Values(FIXTURE_RUST_LEGACY,
                                           FIXTURE_RUST_V0));

} // namespace
} // namespace offcpu
