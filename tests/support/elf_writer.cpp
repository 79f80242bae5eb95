#include "support/elf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace offcpu::test {

namespace {

constexpr uint64_t kPage = 0x1000;

void put_at(std::string &out, uint64_t off, const void *p, size_t n) {
  if (out.size() < off + n)
    out.resize(off + n, '\0');
  memcpy(&out[off], p, n);
}

template <typename T> void append(std::string &out, const T &v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof(v));
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return a > 1 ? (v + a - 1) / a * a : v;
}

// The smallest offset >= `from` that is congruent to `addr` modulo a page,
// so the section can be mapped at its address.
uint64_t congruent(uint64_t from, uint64_t addr) {
  uint64_t off = (from & ~(kPage - 1)) | (addr & (kPage - 1));
  return off < from ? off + kPage : off;
}

} // namespace

uint32_t StringTable::add(const std::string &name) {
  auto off = static_cast<uint32_t>(bytes_.size());
  bytes_ += name;
  bytes_ += '\0';
  return off;
}

ElfWriter::ElfWriter(uint16_t type, uint16_t machine)
    : type_(type), machine_(machine) {}

uint16_t ElfWriter::add_section(ElfSection s) {
  sections_.push_back(std::move(s));
  return static_cast<uint16_t>(sections_.size());
}

uint16_t ElfWriter::section_index(const std::string &name) const {
  for (size_t i = 0; i < sections_.size(); i++)
    if (sections_[i].name == name)
      return static_cast<uint16_t>(i + 1);
  return 0;
}

void ElfWriter::add_segment(const ElfSegment &p) {
  segments_.push_back({p, {}});
}

void ElfWriter::load_covering(const std::vector<uint16_t> &sections,
                              uint32_t flags) {
  segments_.push_back({std::nullopt, {sections, flags}});
}

uint16_t ElfWriter::add_text(uint64_t addr, const std::string &code) {
  ElfSection s;
  s.name = ".text";
  s.flags = SHF_ALLOC | SHF_EXECINSTR;
  s.addr = addr;
  s.content = code;
  s.align = 16;
  return add_section(std::move(s));
}

uint16_t ElfWriter::add_symbols(const std::string &table,
                                const std::string &strtab,
                                const std::vector<ElfSymbol> &symbols,
                                const StringTable &names) {
  bool dynamic = table == ".dynsym";
  ElfSection str;
  str.name = strtab;
  str.type = SHT_STRTAB;
  str.flags = dynamic ? SHF_ALLOC : 0;
  str.content = names.bytes();
  uint16_t str_index = add_section(std::move(str));

  ElfSection sym;
  sym.name = table;
  sym.type = dynamic ? SHT_DYNSYM : SHT_SYMTAB;
  sym.flags = dynamic ? SHF_ALLOC : 0;
  sym.align = 8;
  sym.entsize = sizeof(Elf64_Sym);
  sym.link = str_index;
  sym.content.reserve((symbols.size() + 1) * sizeof(Elf64_Sym));
  append(sym.content, Elf64_Sym{});
  uint32_t locals = 1;
  bool leading = true;
  for (const ElfSymbol &s : symbols) {
    Elf64_Sym e{};
    e.st_name = s.name;
    e.st_info = s.info;
    e.st_other = s.other;
    e.st_shndx = s.shndx;
    e.st_value = s.value;
    e.st_size = s.size;
    append(sym.content, e);
    leading = leading && ELF64_ST_BIND(s.info) == STB_LOCAL;
    locals += leading ? 1 : 0;
  }
  sym.info = locals;
  return add_section(std::move(sym));
}

uint16_t ElfWriter::add_build_id(const std::string &id) {
  ElfSection s;
  s.name = ".note.gnu.build-id";
  s.type = SHT_NOTE;
  s.flags = SHF_ALLOC;
  s.align = 4;
  Elf64_Nhdr n{};
  n.n_namesz = 4;
  n.n_descsz = static_cast<uint32_t>(id.size());
  n.n_type = NT_GNU_BUILD_ID;
  append(s.content, n);
  s.content.append("GNU\0", 4);
  s.content += id;
  s.content.resize(align_up(s.content.size(), 4), '\0');
  return add_section(std::move(s));
}

uint16_t ElfWriter::add_debuglink(const std::string &file, uint32_t crc) {
  ElfSection s;
  s.name = ".gnu_debuglink";
  s.align = 4;
  s.content = file;
  s.content += '\0';
  s.content.resize(align_up(s.content.size(), 4), '\0');
  append(s.content, crc);
  return add_section(std::move(s));
}

std::string ElfWriter::bytes() const {
  // The section name table, last.
  std::vector<ElfSection> all = sections_;
  StringTable shnames;
  std::vector<uint32_t> name_off;
  for (const ElfSection &s : all)
    name_off.push_back(shnames.add(s.name));
  uint32_t shstr_name = shnames.add(".shstrtab");
  ElfSection shstr;
  shstr.name = ".shstrtab";
  shstr.type = SHT_STRTAB;
  shstr.content = shnames.bytes();
  all.push_back(shstr);
  name_off.push_back(shstr_name);

  size_t phnum = segments_.size();
  std::string out;
  uint64_t cursor = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr);
  out.resize(cursor, '\0');

  std::vector<uint64_t> offsets;
  for (const ElfSection &s : all) {
    uint64_t off;
    if (s.offset)
      off = *s.offset;
    else if ((s.flags & SHF_ALLOC) && s.addr)
      off = congruent(align_up(cursor, std::max<uint64_t>(s.align, 1)), s.addr);
    else
      off = align_up(cursor, std::max<uint64_t>(s.align, 1));
    offsets.push_back(off);
    if (s.type != SHT_NOBITS && !s.content.empty()) {
      put_at(out, off, s.content.data(), s.content.size());
      cursor = std::max(cursor, off + s.content.size());
    } else {
      cursor = std::max(cursor, off);
    }
  }
  auto size_of = [&](size_t i) {
    return all[i].size ? *all[i].size : all[i].content.size();
  };

  uint64_t shoff = align_up(std::max<uint64_t>(cursor, out.size()), 8);
  for (size_t i = 0; i <= all.size(); i++) {
    Elf64_Shdr h{};
    if (i > 0) {
      const ElfSection &s = all[i - 1];
      h.sh_name = name_off[i - 1];
      h.sh_type = s.type;
      h.sh_flags = s.flags;
      h.sh_addr = s.addr;
      h.sh_offset = offsets[i - 1];
      h.sh_size = size_of(i - 1);
      h.sh_link = s.link;
      h.sh_info = s.info;
      h.sh_addralign = s.align;
      h.sh_entsize = s.entsize;
    }
    put_at(out, shoff + i * sizeof(h), &h, sizeof(h));
  }

  for (size_t k = 0; k < phnum; k++) {
    const auto &[raw, cover] = segments_[k];
    Elf64_Phdr p{};
    if (raw) {
      p.p_type = raw->type;
      p.p_flags = raw->flags;
      p.p_offset = raw->offset;
      p.p_vaddr = p.p_paddr = raw->vaddr;
      p.p_filesz = raw->filesz;
      p.p_memsz = raw->memsz;
      p.p_align = raw->align;
    } else if (!cover.sections.empty()) {
      size_t first = cover.sections.front() - 1;
      uint64_t off0 = offsets[first] & ~(kPage - 1);
      uint64_t vaddr0 = all[first].addr & ~(kPage - 1);
      uint64_t file_end = off0, mem_end = vaddr0;
      for (uint16_t idx : cover.sections) {
        size_t i = idx - 1;
        if (all[i].type != SHT_NOBITS)
          file_end = std::max(file_end, offsets[i] + size_of(i));
        mem_end = std::max(mem_end, all[i].addr + size_of(i));
      }
      p.p_type = PT_LOAD;
      p.p_flags = cover.flags;
      p.p_offset = off0;
      p.p_vaddr = p.p_paddr = vaddr0;
      p.p_filesz = file_end - off0;
      p.p_memsz = std::max(mem_end - vaddr0, p.p_filesz);
      p.p_align = kPage;
    }
    put_at(out, sizeof(Elf64_Ehdr) + k * sizeof(p), &p, sizeof(p));
  }

  Elf64_Ehdr e{};
  memcpy(e.e_ident, ELFMAG, SELFMAG);
  e.e_ident[EI_CLASS] = ELFCLASS64;
  e.e_ident[EI_DATA] = ELFDATA2LSB;
  e.e_ident[EI_VERSION] = EV_CURRENT;
  e.e_ident[EI_OSABI] = ELFOSABI_SYSV;
  e.e_type = type_;
  e.e_machine = machine_;
  e.e_version = EV_CURRENT;
  e.e_entry = entry_;
  e.e_phoff = phnum ? sizeof(Elf64_Ehdr) : 0;
  e.e_shoff = shoff;
  e.e_ehsize = sizeof(Elf64_Ehdr);
  e.e_phentsize = sizeof(Elf64_Phdr);
  e.e_phnum = static_cast<uint16_t>(phnum);
  e.e_shentsize = sizeof(Elf64_Shdr);
  e.e_shnum = static_cast<uint16_t>(all.size() + 1);
  e.e_shstrndx = static_cast<uint16_t>(all.size());
  put_at(out, 0, &e, sizeof(e));
  return out;
}

bool ElfWriter::write(const std::string &path) const {
  std::string data = bytes();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0)
    return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return close(fd) == 0;
}

uint32_t gnu_debuglink_crc(const std::string &bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

} // namespace offcpu::test
