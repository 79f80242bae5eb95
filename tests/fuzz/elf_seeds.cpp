// Seeds for fuzz_elf in the shapes of issue #26's hostile files, written
// by the tests' ELF writer at fuzzing time (no binary is checked in):
//   elf_seeds DIR
// Each seed stays under fuzz.sh's -max_len (256 KiB).
#include <elf.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/elf_writer.h"

namespace {

using offcpu::test::ElfSection;
using offcpu::test::ElfSymbol;
using offcpu::test::ElfWriter;
using offcpu::test::StringTable;

constexpr uint8_t kFunc = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);

bool save(const std::string &dir, const char *name, const std::string &bytes) {
  std::string path = dir + "/" + name;
  FILE *f = fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return fclose(f) == 0 && ok;
}

ElfWriter with_text(uint16_t &text, size_t size = 0x2000) {
  ElfWriter w;
  text = w.add_text(0x1000, std::string(size, '\xcc'));
  w.load_covering({text}, PF_R | PF_X);
  return w;
}

// Many symbols, one long name (the 500,000-symbol file, scaled down).
std::string shared_long_name() {
  uint16_t text;
  ElfWriter w = with_text(text, 0x3000);
  StringTable names;
  uint32_t shared = names.add(std::string(4096, 'A'));
  std::vector<ElfSymbol> syms;
  for (uint64_t i = 0; i < 5000; i++)
    syms.push_back({shared, 0x1000 + i, 1, kFunc, STV_DEFAULT, text});
  w.add_symbols(".symtab", ".strtab", syms, names);
  syms.resize(2000);
  w.add_symbols(".dynsym", ".dynstr", syms, names);
  return w.bytes();
}

// Every symbol at another offset into one long name, all at one address
// (aliases to choose among).
std::string overlapping_names_one_address() {
  uint16_t text;
  ElfWriter w = with_text(text);
  StringTable names;
  uint32_t base = names.add(std::string(4000, 'B') + "@@V1");
  std::vector<ElfSymbol> syms;
  for (uint32_t i = 0; i < 4000; i++)
    syms.push_back({base + i, 0x1100, 0x10, kFunc, STV_DEFAULT, text});
  w.add_symbols(".symtab", ".strtab", syms, names);
  return w.bytes();
}

// A string table without a final NUL, a name offset past its end.
std::string unterminated_strings() {
  uint16_t text;
  ElfWriter w = with_text(text);
  ElfSection str;
  str.name = ".strtab";
  str.type = SHT_STRTAB;
  str.content = std::string("\0runs_to_the_end", 16);
  uint16_t s = w.add_section(str);
  ElfSection sym;
  sym.name = ".symtab";
  sym.type = SHT_SYMTAB;
  sym.entsize = sizeof(Elf64_Sym);
  sym.link = s;
  Elf64_Sym e[3] = {};
  e[1] = {1, kFunc, 0, text, 0x1010, 8};
  e[2] = {1000, kFunc, 0, text, 0x1020, 8};
  sym.content.assign(reinterpret_cast<const char *>(e), sizeof(e));
  w.add_section(sym);
  return w.bytes();
}

// Sizes and segments that claim far more than the file holds.
std::string lying_sizes() {
  uint16_t text;
  ElfWriter w = with_text(text);
  w.add_segment(
      {PT_LOAD, PF_R | PF_X, 0, uint64_t{1} << 47, 0x1000, uint64_t{1} << 40});
  w.add_segment({PT_LOAD, PF_R, ~uint64_t{0} - 0xfff, ~uint64_t{0} - 0xfff,
                 0x2000, 0x2000});
  StringTable names;
  uint32_t n = names.add("fn");
  ElfSection str;
  str.name = ".strtab";
  str.type = SHT_STRTAB;
  str.content = names.bytes();
  str.size = uint64_t{1} << 40;
  uint16_t s = w.add_section(str);
  ElfSection sym;
  sym.name = ".symtab";
  sym.type = SHT_SYMTAB;
  sym.entsize = sizeof(Elf64_Sym);
  sym.link = s;
  Elf64_Sym e[2] = {};
  e[1] = {n, kFunc, 0, text, 0x1010, 8};
  sym.content.assign(reinterpret_cast<const char *>(e), sizeof(e));
  sym.size = uint64_t{1} << 36;
  w.add_section(sym);
  return w.bytes();
}

// A stripped file that points elsewhere: build id and debuglink.
std::string debug_pointers() {
  uint16_t text;
  ElfWriter w = with_text(text);
  StringTable names;
  w.add_symbols(
      ".dynsym", ".dynstr",
      {{names.add("exported"), 0x1100, 0x10, kFunc, STV_DEFAULT, text}}, names);
  w.add_build_id(std::string(20, '\x26'));
  w.add_debuglink("huge.debug", 0xdeadbeef);
  return w.bytes();
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: elf_seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  bool ok = save(dir, "shared_long_name", shared_long_name()) &&
            save(dir, "overlapping_names_one_address",
                 overlapping_names_one_address()) &&
            save(dir, "unterminated_strings", unterminated_strings()) &&
            save(dir, "lying_sizes", lying_sizes()) &&
            save(dir, "debug_pointers", debug_pointers());
  if (!ok)
    perror(dir.c_str());
  return ok ? 0 : 1;
}
