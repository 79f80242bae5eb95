// ELF symbolization of binaries the test build compiles: each fixture runs,
// prints the runtime addresses of its functions, and the Symbolizer must name
// them from /proc/PID/maps and the ELF file, as it does for profiled code.
#include <gtest/gtest.h>

#include <sys/auxv.h>
#include <unistd.h>

#include <map>

#include "support/process.h"
#include "symbolize/elf_file.h"
#include "symbolize/symbolizer.h"

namespace offcpu {
namespace {

struct RunningFixture {
  std::unique_ptr<test::Subprocess> proc;
  std::map<std::string, uint64_t> addrs;
};

RunningFixture start(const char *path) {
  RunningFixture f;
  f.proc = std::make_unique<test::Subprocess>(std::vector<std::string>{path});
  for (;;) {
    auto line = f.proc->read_line(10);
    if (!line || *line == "ready")
      break;
    auto space = line->find(' ');
    f.addrs[line->substr(0, space)] =
        std::stoull(line->substr(space + 1), nullptr, 16);
  }
  return f;
}

std::string name_of(Symbolizer &sym, const RunningFixture &f,
                    const std::string &fn, uint64_t delta = 1) {
  // Return addresses point inside a function: look up a byte past its entry.
  return sym.user_frame(static_cast<uint32_t>(f.proc->pid()),
                        f.addrs.at(fn) + delta, false);
}

class ElfSymbolization : public ::testing::TestWithParam<const char *> {};

TEST_P(ElfSymbolization, NamesExecutableAndLibraryFunctions) {
  RunningFixture f = start(GetParam());
  ASSERT_EQ(f.addrs.size(), 4u);
  Symbolizer sym(system_files(), KernelSymbols{});
  EXPECT_EQ(name_of(sym, f, "fixture_alpha"), "fixture_alpha");
  EXPECT_EQ(name_of(sym, f, "fixture_beta"), "fixture_beta");
  EXPECT_EQ(name_of(sym, f, "lib_helper"), "lib_helper"); // local, in the .so
  EXPECT_EQ(name_of(sym, f, "sized_fn", 0), "sized_fn");
}

TEST_P(ElfSymbolization, AddressPastSymbolSizeIsNotThatSymbol) {
  RunningFixture f = start(GetParam());
  Symbolizer sym(system_files(), KernelSymbols{});
  std::string exe = GetParam();
  std::string module = "[" + exe.substr(exe.rfind('/') + 1) + "]";
  // sized_fn is one byte long; 32 bytes on are padding owned by no symbol.
  EXPECT_EQ(name_of(sym, f, "sized_fn", 32), module);
}

INSTANTIATE_TEST_SUITE_P(PieAndNonPie, ElfSymbolization,
                         ::testing::Values(FIXTURE_PIE, FIXTURE_NOPIE));

TEST(ElfSymbolizationCxx, NamesAreDemangled) {
  RunningFixture f = start(FIXTURE_CXX);
  Symbolizer sym(system_files(), KernelSymbols{});
  EXPECT_EQ(name_of(sym, f, "make"), "fixture_ns::Widget::make(int)");
  EXPECT_EQ(name_of(sym, f, "twice"), "long fixture_ns::twice<long>(long)");
}

TEST(ElfCache, EachFileParsedOnce) {
  RunningFixture f = start(FIXTURE_PIE);
  Symbolizer sym(system_files(), KernelSymbols{});
  ASSERT_EQ(name_of(sym, f, "fixture_alpha"), "fixture_alpha");
  ASSERT_EQ(name_of(sym, f, "lib_helper"), "lib_helper");
  // The process's executable files are opened when its maps are first read
  // and parsed (with their debug files) once, when first needed; lookups
  // after that parse nothing.
  uint64_t parsed = sym.stats().elf_files_parsed;
  EXPECT_GE(parsed, 2u);
  for (int i = 0; i < 50; i++) {
    ASSERT_EQ(name_of(sym, f, "fixture_alpha"), "fixture_alpha");
    ASSERT_EQ(name_of(sym, f, "lib_helper"), "lib_helper");
  }
  EXPECT_EQ(sym.stats().elf_files_parsed, parsed);
}

TEST(Vdso, NamedFromTheProcessesOwnImage) {
  // Our own vDSO tells which names to expect; the child's is the same image
  // at another address.
  uint64_t base = getauxval(AT_SYSINFO_EHDR);
  ASSERT_NE(base, 0u);
  auto own_maps =
      parse_proc_maps(*system_files().read("/proc/self/maps", 1 << 20));
  const Mapping *own = find_mapping(own_maps, base);
  ASSERT_TRUE(own && own->path == "[vdso]");
  auto image = ElfFile::open_memory(
      std::string(reinterpret_cast<const char *>(base), own->end - own->start));
  ASSERT_TRUE(image);
  const ElfSymbol *probe = nullptr;
  for (const ElfSymbol &s : image->symbols())
    if (s.size > 16)
      probe = &s;
  ASSERT_NE(probe, nullptr);

  test::Subprocess child({"/bin/sleep", "30"});
  test::sleep_seconds(0.2);
  auto child_maps = parse_proc_maps(*system_files().read(
      "/proc/" + std::to_string(child.pid()) + "/maps", 1 << 20));
  const Mapping *vdso = nullptr;
  for (const Mapping &m : child_maps)
    if (m.path == "[vdso]")
      vdso = &m;
  ASSERT_NE(vdso, nullptr);
  if (!system_files().read_at("/proc/" + std::to_string(child.pid()) + "/mem",
                              vdso->start, 16))
    GTEST_SKIP() << "cannot read the child's memory (needs ptrace access)";
  Symbolizer sym(system_files(), KernelSymbols{});
  uint64_t addr = vdso->start + *image->file_offset_to_vaddr(probe->addr) + 4;
  EXPECT_EQ(sym.user_frame(static_cast<uint32_t>(child.pid()), addr, false),
            probe->name);
}

TEST(ElfFile, ReadsBuildIdAndSegments) {
  auto elf = ElfFile::open(FIXTURE_PIE);
  ASSERT_TRUE(elf);
  EXPECT_TRUE(elf->has_symtab());
  EXPECT_EQ(elf->build_id().size(), 40u); // sha1 build ids: 20 bytes
  EXPECT_TRUE(elf->file_offset_to_vaddr(0).has_value());
  EXPECT_FALSE(elf->file_offset_to_vaddr(1ull << 40).has_value());
}

TEST(ElfFile, RejectsNonElfAndSpecialFiles) {
  EXPECT_EQ(ElfFile::open("/etc/hostname"), nullptr);
  EXPECT_EQ(ElfFile::open("/nonexistent/file"), nullptr);
  EXPECT_EQ(ElfFile::open("/dev/zero"), nullptr);
  EXPECT_EQ(ElfFile::open("/proc/self/status"), nullptr);
}

TEST(ElfFile, StrippedLibcUsesDebugFileByBuildId) {
  // Debian's libc6 is stripped; libc6-dbg installs its symbols by build id.
  const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
  auto elf = ElfFile::open(libc);
  ASSERT_TRUE(elf);
  std::string id = elf->build_id();
  std::string dbg = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                    id.substr(2) + ".debug";
  if (access(dbg.c_str(), R_OK) != 0)
    GTEST_SKIP() << "libc6-dbg not installed (" << dbg << ")";
  auto debug = ElfFile::open(dbg);
  ASSERT_TRUE(debug);
  EXPECT_TRUE(debug->has_symtab());
  EXPECT_GT(debug->symbol_count(), elf->symbol_count());
}

} // namespace
} // namespace offcpu
