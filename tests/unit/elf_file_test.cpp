// ELF symbolization of binaries the test build compiles: each fixture runs,
// prints the runtime addresses of its functions, and the Symbolizer must name
// them from /proc/PID/maps and the ELF file, as it does for profiled code.
#include <gtest/gtest.h>

#include <sys/auxv.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <regex>

#include "support/elf_writer.h"
#include "support/process.h"
#include "symbolize/elf_file.h"
#include "symbolize/symbolizer.h"
#include "util/clock.h"

// Data objects of this test binary, for the futex words' names: one in
// .data, one in .bss large enough to reach past the file's last page (into
// the zero-filled mapping after it).
extern "C" {
int offcpu_test_data_word[4] = {1, 2, 3, 4};
char offcpu_test_bss_block[1 << 20];
}

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

// The fixture running, and a Symbolizer that noted a stack holding
// fixture_alpha and parsed the files the fixture maps.
struct NotedFixture {
  RunningFixture f = start(FIXTURE_PIE);
  uint32_t pid = static_cast<uint32_t>(f.proc->pid());
  Symbolizer sym{system_files(), KernelSymbols{}};
  bool parsed = false;
  NotedFixture() {
    sym.note_user_stack(pid, 1, {at("fixture_alpha")});
    parsed = sym.parse_pending(monotonic_ns() + 10'000'000'000);
  }
  // A return address inside `fn`.
  uint64_t at(const char *fn) const { return f.addrs.at(fn) + 1; }
};

// The end of the window (settle_dwarf): each file's DWARF is taken and the
// addresses its stacks hold are looked up then, before the counts are
// drained. Naming reads no section again, even for an address noted after
// the loader let the file go for another (that reading, libc's debug file
// inflated again while the profile was being built, was 8.5 MiB of a
// whole-system run's peak RSS, issue #27).
TEST(DwarfSettle, NamingReadsNoSectionAfterTheWindow) {
  NotedFixture n;
  ASSERT_TRUE(n.parsed);
  Symbolizer &sym = n.sym;
  sym.note_user_stack(n.pid, 2, {n.at("lib_helper")});
  test::sleep_seconds(0.3); // the loader may turn to the library's DWARF
  sym.note_user_stack(n.pid, 3, {n.at("fixture_beta")});
  sym.settle_dwarf();
  const uint64_t reopens = sym.stats().dwarf_reopens;
  EXPECT_GE(sym.stats().dwarf_files, 1u); // the executable's, at least
  for (const char *fn : {"fixture_alpha", "fixture_beta"}) {
    const auto &chain = sym.user_source(n.pid, n.at(fn), false);
    ASSERT_FALSE(chain.empty()) << fn;
    ASSERT_TRUE(chain.front().function) << fn;
    EXPECT_EQ(*chain.front().function, fn);
  }
  EXPECT_EQ(sym.stats().dwarf_reopens, reopens)
      << "a file's DWARF was read again while naming";
}

// A file's DWARF is read once one of its addresses is in a stack: the
// fixture maps its library (built with -g) and libc and ld.so (debug files
// from libc6-dbg), but only the executable is in the stack. Each was read
// on every run before, for nothing (libc6-dbg's ld.so and libm on every
// whole-system run: CPU and their inflated sections, issue #27).
TEST(DwarfSettle, FilesInNoStackAreNotRead) {
  NotedFixture n;
  ASSERT_TRUE(n.parsed);
  Symbolizer &sym = n.sym;
  test::sleep_seconds(0.3); // the loader's turn
  sym.settle_dwarf();
  EXPECT_EQ(sym.dwarf_files_read(), 1u);
  // Named later from a stack the window did not note: read then.
  const auto &chain = sym.user_source(n.pid, n.at("lib_helper"), false);
  if (!chain.empty()) { // where the library has DWARF
    ASSERT_TRUE(chain.front().function);
    EXPECT_EQ(*chain.front().function, "lib_helper");
    EXPECT_EQ(sym.dwarf_files_read(), 2u);
  }
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

// Symbol budgets (issue #26), on files the ELF writer makes: what one file
// may cost is bounded however its symbols are shaped.

// `count` one-byte functions from 0x10000 on, named by `name_of(i)`, which
// returns an offset into `names`.
std::string many_symbols(size_t count, test::StringTable &names,
                         const std::function<uint32_t(size_t)> &name_of,
                         const char *table = ".symtab") {
  test::ElfWriter w;
  uint16_t text = w.add_text(0x10000, std::string(count + 16, '\xcc'));
  std::vector<test::ElfSymbol> syms;
  for (size_t i = 0; i < count; i++)
    syms.push_back({name_of(i), 0x10000 + i, 1,
                    ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, text});
  w.add_symbols(table, table == std::string(".dynsym") ? ".dynstr" : ".strtab",
                syms, names);
  return w.bytes();
}

TEST(SymbolBudget, OneNameSharedByManySymbolsIsHeldOnce) {
  test::StringTable names;
  uint32_t shared = names.add(std::string(4096, 'A'));
  SymbolLimits roomy;
  roomy.max_name_bytes = uint64_t{1} << 40;
  roomy.max_ns = uint64_t{60} * 1000000000;
  auto elf = ElfFile::open_memory(
      many_symbols(100000, names, [&](size_t) { return shared; }), roomy);
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->symbol_loss(), SymbolLoss::None);
  ASSERT_EQ(elf->symbol_count(), 100000u);
  for (const ElfSymbol &s : elf->symbols()) {
    ASSERT_EQ(s.name.size(), 4096u);
    ASSERT_EQ(s.name.data(), elf->symbols()[0].name.data()); // one copy
  }
  EXPECT_EQ(elf->find(0x10000 + 777)->name, std::string(4096, 'A'));
}

TEST(SymbolBudget, NameBytesAreCountedPerUse) {
  test::StringTable names;
  uint32_t shared = names.add(std::string(100, 'B'));
  SymbolLimits limits;
  limits.max_name_bytes = 10000;
  auto elf = ElfFile::open_memory(
      many_symbols(1000, names, [&](size_t) { return shared; }), limits);
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->symbol_loss(), SymbolLoss::NameBytes);
  EXPECT_EQ(elf->symbol_count(), 100u);
}

TEST(SymbolBudget, SymbolCountIsCapped) {
  test::StringTable names;
  std::vector<uint32_t> offs;
  for (int i = 0; i < 5000; i++)
    offs.push_back(names.add("fn_" + std::to_string(i)));
  SymbolLimits limits;
  limits.max_symbols = 1000;
  auto elf = ElfFile::open_memory(
      many_symbols(5000, names, [&](size_t i) { return offs[i]; }), limits);
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->symbol_loss(), SymbolLoss::Symbols);
  EXPECT_EQ(elf->symbol_count(), 1000u);
  // What was kept is named right; what was not is in no symbol.
  EXPECT_EQ(elf->find(0x10000 + 10)->name, "fn_10");
  EXPECT_EQ(elf->find(0x10000 + 4000), nullptr);
}

TEST(SymbolBudget, TimeIsCheckedInsideTheLoop) {
  test::StringTable names;
  uint32_t shared = names.add("slow");
  SymbolLimits limits;
  limits.max_ns = 0;
  auto elf = ElfFile::open_memory(
      many_symbols(5000, names, [&](size_t) { return shared; }), limits);
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->symbol_loss(), SymbolLoss::Time);
  EXPECT_LT(elf->symbol_count(), 5000u);
}

TEST(SymbolBudget, TheRunsShareIsSpentAcrossFiles) {
  test::StringTable names;
  uint32_t shared = names.add("shared_fn");
  std::string image = many_symbols(3000, names, [&](size_t) { return shared; });
  SymbolRunBudget run;
  run.symbols_left = 5000;
  auto first = ElfFile::open_memory(image, SymbolLimits{}, &run);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->symbol_count(), 3000u);
  EXPECT_EQ(first->symbol_loss(), SymbolLoss::None);
  auto second = ElfFile::open_memory(image, SymbolLimits{}, &run);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->symbol_count(), 2000u);
  EXPECT_EQ(second->symbol_loss(), SymbolLoss::RunBudget);
  EXPECT_EQ(run.symbols_left, 0u);
}

TEST(SymbolBudget, NamesStopAtTheStringTablesEnd) {
  // A name offset inside the table whose string runs to its end without a
  // terminator: read up to the end, never past it.
  test::ElfWriter w;
  uint16_t text = w.add_text(0x10000, std::string(64, '\xcc'));
  test::StringTable names;
  names.add("unterminated_at_the_end");
  std::string strtab = names.bytes();
  strtab.pop_back(); // the last NUL
  test::ElfSection str;
  str.name = ".strtab";
  str.type = SHT_STRTAB;
  str.content = strtab;
  uint16_t stri = w.add_section(str);
  test::ElfSection sym;
  sym.name = ".symtab";
  sym.type = SHT_SYMTAB;
  sym.entsize = sizeof(Elf64_Sym);
  sym.link = stri;
  sym.info = 1;
  Elf64_Sym entries[2] = {};
  entries[1].st_name = 1;
  entries[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  entries[1].st_shndx = text;
  entries[1].st_value = 0x10000;
  entries[1].st_size = 8;
  sym.content.assign(reinterpret_cast<const char *>(entries), sizeof(entries));
  w.add_section(sym);
  auto elf = ElfFile::open_memory(w.bytes());
  ASSERT_TRUE(elf);
  ASSERT_EQ(elf->symbol_count(), 1u);
  EXPECT_EQ(elf->symbols()[0].name, "unterminated_at_the_end");
}

TEST(SymbolBudget, DynsymIsReadOnlyWithoutSymtab) {
  test::StringTable names;
  uint32_t a = names.add("from_symtab");
  test::StringTable dyn;
  uint32_t b = dyn.add("from_dynsym");
  test::ElfWriter w;
  uint16_t text = w.add_text(0x10000, std::string(64, '\xcc'));
  auto fn = [&](uint32_t name) {
    return test::ElfSymbol{name,        0x10000,
                           8,           ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                           STV_DEFAULT, text};
  };
  w.add_symbols(".dynsym", ".dynstr", {fn(b)}, dyn);
  w.add_symbols(".symtab", ".strtab", {fn(a)}, names);
  auto elf = ElfFile::open_memory(w.bytes());
  ASSERT_TRUE(elf);
  EXPECT_TRUE(elf->has_symtab());
  ASSERT_EQ(elf->symbol_count(), 1u);
  EXPECT_EQ(elf->symbols()[0].name, "from_symtab");
}

// offcpu lock --futex: a futex word is named by the data object holding
// it, .bss included; outside any, by its mapping.
TEST(ElfDataSymbols, FutexWordsNamedByTheirVariable) {
  // Allocated before the first lookup reads this process's maps (once, as
  // for a traced process): the symbol tables read then may grow the heap
  // past the end that reading saw.
  auto on_heap = std::make_unique<int>(0);
  Symbolizer sym(system_files(), KernelSymbols{});
  sym.set_data_symbols(true);
  const auto me = static_cast<uint32_t>(getpid());
  auto at = [](const void *p) { return reinterpret_cast<uint64_t>(p); };
  EXPECT_EQ(sym.user_data(me, 0, at(&offcpu_test_data_word[0])),
            "offcpu_test_data_word");
  EXPECT_EQ(sym.user_data(me, 0, at(&offcpu_test_data_word[2])),
            "offcpu_test_data_word+0x8");
  EXPECT_EQ(sym.user_data(me, 0, at(&offcpu_test_bss_block[600000])),
            "offcpu_test_bss_block+0x927c0");
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator maps its own memory: no [heap] there.
  const char *heap = "anon";
#else
  // The [heap] unless malloc found no room to grow it there (then it maps
  // anonymous memory of its own: 1 full unit-test run in 6 here).
  const char *heap = "(heap|anon)";
#endif
  const std::string heap_word = sym.user_data(me, 0, at(on_heap.get()));
  EXPECT_TRUE(std::regex_match(
      heap_word,
      std::regex(std::string("\\[futex 0x[0-9a-f]+ ") + heap + "\\]")))
      << heap_word;
  int on_stack = 0;
  EXPECT_TRUE(std::regex_match(sym.user_data(me, 0, at(&on_stack)),
                               std::regex("\\[futex 0x[0-9a-f]+ stack\\]")))
      << sym.user_data(me, 0, at(&on_stack));
}

} // namespace
} // namespace offcpu
