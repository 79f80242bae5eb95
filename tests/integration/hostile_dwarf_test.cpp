// Issue #31, hostile input: DWARF (.debug_info, .debug_abbrev, .debug_line)
// in files an unprivileged user controls, read by libdw, which is not
// hardened against it. The files are written at test time by the ELF
// writer and mapped by the hostile_elf workload run as the test user. Each
// run must end on time, exit 0, keep the symbol's name for the frame, and
// say on stderr what DWARF it could not use.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "support/elf_writer.h"
#include "support/folded_parse.h"
#include "support/hostile_fixture.h"
#include "support/process.h"

namespace offcpu {
namespace {

using test::ElfWriter;
using test::expect_clean_run;
using test::ok;
using test::run_offcpu;
using test::StringTable;
using test::Timed;
using test::Workload;

// As in hostile_symbols_test.cpp: .text at kText, at the same file offset;
// the workload's forged return address is at file offset 0x1108, inside
// the function at kFn.
constexpr uint64_t kText = 0x1000;
constexpr uint64_t kFn = kText + 0x100;
constexpr uint64_t kFnSize = 0x10;
const char *const kFrameOffset = "1108";

// DWARF 4 bytes, written by hand.
struct Bytes {
  std::string b;
  void u8(uint8_t v) { b += static_cast<char>(v); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void uleb(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      u8(byte | (v ? 0x80 : 0));
    } while (v);
  }
  void str(const std::string &s) { b += s + '\0'; }
  void raw(const void *p, size_t n) {
    b.append(static_cast<const char *>(p), n);
  }
};

// Abbreviations: 1 the unit, 2 a function, 3 an inlined call (both
// covering [low, low + len)), 4 a lexical block covering nothing of ours.
std::string abbrevs() {
  Bytes a;
  auto attr = [&](uint64_t at, uint64_t form) {
    a.uleb(at);
    a.uleb(form);
  };
  a.uleb(1), a.uleb(0x11), a.u8(1); // DW_TAG_compile_unit, children
  attr(0x03, 0x08);                 // DW_AT_name, DW_FORM_string
  attr(0x11, 0x01);                 // DW_AT_low_pc, DW_FORM_addr
  attr(0x12, 0x07);                 // DW_AT_high_pc, DW_FORM_data8
  attr(0x10, 0x17);                 // DW_AT_stmt_list, DW_FORM_sec_offset
  attr(0, 0);
  a.uleb(2), a.uleb(0x2e), a.u8(1); // DW_TAG_subprogram
  attr(0x03, 0x08), attr(0x11, 0x01), attr(0x12, 0x07), attr(0, 0);
  a.uleb(3), a.uleb(0x1d), a.u8(1); // DW_TAG_inlined_subroutine
  attr(0x03, 0x08), attr(0x11, 0x01), attr(0x12, 0x07);
  attr(0x59, 0x0b); // DW_AT_call_line, DW_FORM_data1
  attr(0, 0);
  a.uleb(4), a.uleb(0x0b), a.u8(0); // DW_TAG_lexical_block, no children
  attr(0x11, 0x01), attr(0x12, 0x07), attr(0, 0);
  a.u8(0);
  return a.b;
}

// One unit over kFn: `wide` lexical blocks elsewhere first, then the
// function, then `deep` inlined calls nested in each other, all over kFn.
std::string unit(size_t wide, size_t deep) {
  Bytes d;
  d.u16(4);  // version
  d.u32(0);  // abbrev offset
  d.u8(8);   // address size
  d.uleb(1); // the unit
  d.str("hostile.c");
  d.u64(kText);
  d.u64(0x1000);
  d.u32(0);
  for (size_t i = 0; i < wide; i++) {
    d.uleb(4);
    d.u64(0x1800);
    d.u64(1);
  }
  d.uleb(2);
  d.str("dwarf_fn");
  d.u64(kFn);
  d.u64(kFnSize);
  for (size_t i = 0; i < deep; i++) {
    d.uleb(3);
    d.str("inl" + std::to_string(i));
    d.u64(kFn);
    d.u64(kFnSize);
    d.u8(static_cast<uint8_t>(i));
  }
  for (size_t i = 0; i < deep + 2; i++)
    d.u8(0); // ends the children of each
  Bytes out;
  out.u32(static_cast<uint32_t>(d.b.size()));
  return out.b + d.b;
}

struct DwarfSpec {
  std::string info, abbrev, line;
  uint64_t info_flags = 0;                // SHF_COMPRESSED: a forged header
  std::optional<uint64_t> info_size = {}; // sh_size if not the content's
};

bool write_elf(const std::string &path, const DwarfSpec &spec) {
  ElfWriter w;
  uint16_t t = w.add_text(kText, std::string(0x1000, '\xcc'));
  w.add_segment({PT_LOAD, PF_R | PF_X, 0, 0, kText + 0x1000, kText + 0x1000});
  StringTable names;
  std::vector<test::ElfSymbol> syms{{names.add("true_name"), kFn, kFnSize,
                                     ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                                     STV_DEFAULT, t}};
  w.add_symbols(".symtab", ".strtab", syms, names);
  test::ElfSection info;
  info.name = ".debug_info";
  info.flags = spec.info_flags;
  info.content = spec.info;
  info.size = spec.info_size;
  w.add_section(info);
  test::ElfSection abbrev;
  abbrev.name = ".debug_abbrev";
  abbrev.content = spec.abbrev;
  w.add_section(abbrev);
  test::ElfSection line;
  line.name = ".debug_line";
  line.content = spec.line;
  w.add_section(line);
  return w.write(path);
}

std::string random_bytes(std::mt19937_64 &rng, size_t n) {
  std::string s(n, '\0');
  for (char &c : s)
    c = static_cast<char>(rng());
  return s;
}

class HostileDwarf : public test::HostileFiles {
protected:
  static void SetUpTestSuite() {
    HostileFiles::SetUpTestSuite();
    if (!skip_.empty())
      return;
    if (!ok(test::run({"/bin/cp", WORKLOAD_HOSTILE_ELF, hostile_elf()}, 30)) ||
        chmod(hostile_elf().c_str(), 0755) != 0)
      skip_ = "could not copy the workload to " + bin_dir_;
  }
  static std::string hostile_elf() { return bin_dir_ + "/hostile_elf"; }

  // Maps the files as the test user, runs offcpu --lines for 2 s: a clean
  // run, every file's frame still named by its symbol. Returns the run.
  // Naming may take 0.2 s after the window (--name-time): the DWARF walks
  // must stop there, and the start of the run keeps its share of the 1 s
  // a clean run may overrun by on a loaded machine.
  Timed run_on(const std::vector<DwarfSpec> &specs, const std::string &what) {
    std::string scratch = user_scratch_dir();
    EXPECT_FALSE(scratch.empty());
    std::vector<std::string> argv{hostile_elf(), "map", "dwarfs", "0",
                                  kFrameOffset};
    for (size_t i = 0; i < specs.size(); i++) {
      std::string file = scratch + "/dwarf" + std::to_string(i) + ".so";
      EXPECT_TRUE(write_elf(file, specs[i]));
      EXPECT_EQ(chown(file.c_str(), uid_, gid_), 0);
      argv.push_back(file);
    }
    Workload w = start(argv);
    EXPECT_TRUE(w.ready()) << w.error();
    Timed t = run_offcpu({"-p", w.pid(), "-f", "--lines", "--per-thread",
                          "--name-time", "0.2", "2"},
                         2);
    expect_clean_run(t, 2, what);
    size_t named = 0;
    for (const auto &l : test::parse_folded(t.r.out))
      for (const auto &f : l.frames)
        named += f.rfind("true_name", 0) == 0;
    EXPECT_GE(named, specs.size())
        << what << ": a file's frame lost its symbol\n"
        << t.r.out;
    return t;
  }
};

// Random bytes after a valid unit header, in all three sections: libdw
// must refuse or read them without crashing or stalling.
TEST_F(HostileDwarf, RandomSectionsDoNotCrashOrStall) {
  std::mt19937_64 rng(31);
  std::vector<DwarfSpec> specs;
  for (int i = 0; i < 12; i++) {
    DwarfSpec s;
    std::string good = unit(0, 2);
    s.info = good.substr(0, 11) + random_bytes(rng, 4096);
    s.abbrev = i % 2 ? abbrevs() : random_bytes(rng, 512);
    s.line = random_bytes(rng, 2048);
    if (i % 3 == 0) // a whole unit, only its line table garbage
      s.info = good;
    specs.push_back(s);
  }
  Timed t = run_on(specs, "random DWARF");
  std::cerr << "[ info ] random DWARF: " << t.seconds << " s\n";
}

// Inlined calls nested 100,000 deep over one address: the chain is cut
// (no recursion, no unbounded path), the frame keeps its name.
TEST_F(HostileDwarf, InlineChainDeeperThanAnyProgramIsCut) {
  DwarfSpec s{unit(0, 100000), abbrevs(), ""};
  Timed t = run_on({s}, "100,000 nested inlined calls");
  size_t deepest = 0;
  for (const auto &l : test::parse_folded(t.r.out))
    deepest = std::max(deepest, l.frames.size());
  EXPECT_LT(deepest, 600u) << "the chain was not cut";
}

// Two million sibling DIEs before the function, in each of eight files:
// every lookup's DIE count and the file's time budget bound the walks.
TEST_F(HostileDwarf, MillionsOfDiesAreWalkedWithinBudget) {
  DwarfSpec s{unit(2000000, 1), abbrevs(), ""};
  Timed t = run_on(std::vector<DwarfSpec>(8, s), "2M DIEs per file");
  std::cerr << "[ info ] 8 files of 2M DIEs: " << t.seconds << " s, peak RSS "
            << t.r.max_rss_kb / 1024 << " MB\n";
}

// A compressed .debug_info that claims to inflate to 1 TiB: refused on its
// header, before libdw reads it, and said on stderr.
TEST_F(HostileDwarf, CompressedSectionClaimingATerabyteIsNotRead) {
  Bytes chdr;
  chdr.u32(ELFCOMPRESS_ZLIB);
  chdr.u32(0);
  chdr.u64(uint64_t{1} << 40);
  chdr.u64(1);
  DwarfSpec s{chdr.b + std::string(64, '\x78'), abbrevs(), ""};
  s.info_flags = SHF_COMPRESSED;
  Timed t = run_on({s}, "a 1 TiB compressed .debug_info");
  EXPECT_NE(t.r.err.find("DWARF sections over 512 MiB"), std::string::npos)
      << t.r.err;
}

} // namespace
} // namespace offcpu
