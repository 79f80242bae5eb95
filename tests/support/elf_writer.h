// A small ELF64 (little-endian) writer for tests: generators build the
// hostile and ordinary binaries they need at test time, field by field, so
// no binary is checked in. Nothing is validated: a test may write any value
// (symbols sharing one name, segments 2^47 bytes apart, sizes past the end
// of the file), since malformed files are what it is for.
//
// Layout: ELF header, program headers, then the sections in the order they
// were added, then the section headers. An allocated section with an address
// lands at a file offset congruent to that address modulo 4 KiB, so a
// PT_LOAD from load_covering() can map it; Section::offset places one
// exactly instead.
#pragma once

#include <elf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace offcpu::test {

// A string table under construction: starts with the empty name at 0.
class StringTable {
public:
  // Appends `name` and returns its offset (no sharing: call once and reuse
  // the offset to make many symbols point at one name).
  uint32_t add(const std::string &name);
  const std::string &bytes() const { return bytes_; }

private:
  std::string bytes_{std::string(1, '\0')};
};

struct ElfSymbol {
  uint32_t name = 0; // offset into the linked string table
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  uint8_t other = STV_DEFAULT;
  uint16_t shndx = SHN_UNDEF; // an index from ElfWriter::add_section
};

struct ElfSection {
  std::string name;
  uint32_t type = SHT_PROGBITS;
  uint64_t flags = 0;
  uint64_t addr = 0;
  std::string content; // the bytes in the file (none for SHT_NOBITS)
  uint64_t align = 1;
  uint64_t entsize = 0;
  uint32_t link = 0; // a section index
  uint32_t info = 0;
  std::optional<uint64_t> offset; // exact file offset, else laid out
  std::optional<uint64_t> size;   // sh_size if not content.size()
};

struct ElfSegment {
  uint32_t type = PT_LOAD;
  uint32_t flags = PF_R;
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint64_t align = 0x1000;
};

class ElfWriter {
public:
  explicit ElfWriter(uint16_t type = ET_DYN, uint16_t machine = EM_X86_64);

  // Returns the section's index (1, 2, ...: 0 is the null section; the
  // section name table comes last).
  uint16_t add_section(ElfSection s);
  uint16_t section_index(const std::string &name) const; // 0 if absent

  // Raw program header, written as given.
  void add_segment(const ElfSegment &p);
  // A PT_LOAD over the given sections (by index), computed at layout: from
  // the page holding the first to the end of the last.
  void load_covering(const std::vector<uint16_t> &sections, uint32_t flags);

  // An executable .text at `addr` holding `code`.
  uint16_t add_text(uint64_t addr, const std::string &code);
  // A symbol table (".symtab" + ".strtab" or ".dynsym" + ".dynstr", or any
  // names) whose first entry, the null symbol, is added for you. Local
  // symbols are counted for sh_info as far as they lead the list.
  uint16_t add_symbols(const std::string &table, const std::string &strtab,
                       const std::vector<ElfSymbol> &symbols,
                       const StringTable &names);
  uint16_t add_build_id(const std::string &id); // .note.gnu.build-id
  uint16_t add_debuglink(const std::string &file, uint32_t crc);

  void set_entry(uint64_t entry) { entry_ = entry; }

  std::string bytes() const;
  // Writes bytes() to `path` (mode 0755); false on error.
  bool write(const std::string &path) const;

private:
  struct Cover {
    std::vector<uint16_t> sections;
    uint32_t flags;
  };
  uint16_t type_, machine_;
  uint64_t entry_ = 0;
  std::vector<ElfSection> sections_;
  // Raw segments and computed ones, in the order added.
  std::vector<std::pair<std::optional<ElfSegment>, Cover>> segments_;
};

// The CRC-32 .gnu_debuglink carries (zlib's polynomial).
uint32_t gnu_debuglink_crc(const std::string &bytes);

} // namespace offcpu::test
