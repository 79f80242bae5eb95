// The tests' ELF writer, read back with libelf: what a generator asks for is
// what a reader finds (headers, segments, sections, symbols sharing a name,
// build id, debuglink), so the hostile-file tests built on it attack what
// they say they attack.
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>

#include "support/elf_writer.h"

namespace offcpu::test {
namespace {

class ReadBack {
public:
  explicit ReadBack(const std::string &bytes) : bytes_(bytes) {
    elf_version(EV_CURRENT);
    elf_ = elf_memory(bytes_.data(), bytes_.size());
  }
  ~ReadBack() { elf_end(elf_); }
  Elf *elf() { return elf_; }

  Elf_Scn *section(const std::string &name) {
    size_t shstrndx = 0;
    elf_getshdrstrndx(elf_, &shstrndx);
    for (Elf_Scn *scn = elf_nextscn(elf_, nullptr); scn;
         scn = elf_nextscn(elf_, scn)) {
      GElf_Shdr sh;
      gelf_getshdr(scn, &sh);
      const char *n = elf_strptr(elf_, shstrndx, sh.sh_name);
      if (n && name == n)
        return scn;
    }
    return nullptr;
  }
  std::string content(const std::string &name) {
    Elf_Scn *scn = section(name);
    Elf_Data *d = scn ? elf_getdata(scn, nullptr) : nullptr;
    return d ? std::string(static_cast<char *>(d->d_buf), d->d_size) : "";
  }

private:
  std::string bytes_;
  Elf *elf_ = nullptr;
};

ElfWriter sample() {
  ElfWriter w;
  uint16_t text = w.add_text(0x1000, std::string(64, '\xc3'));
  ElfSection eh;
  eh.name = ".eh_frame";
  eh.flags = SHF_ALLOC;
  eh.addr = 0x1040;
  eh.content = std::string(16, '\0');
  eh.align = 8;
  uint16_t ehi = w.add_section(eh);
  w.load_covering({text, ehi}, PF_R | PF_X);
  w.add_segment({PT_LOAD, PF_R | PF_W, 0, 1ull << 47, 0, 0x1000, 0x1000});

  StringTable names;
  uint32_t shared = names.add(std::string(100, 'x'));
  uint32_t local = names.add("local_fn");
  std::vector<ElfSymbol> syms;
  syms.push_back({local, 0x1000, 8, ELF64_ST_INFO(STB_LOCAL, STT_FUNC),
                  STV_DEFAULT, text});
  for (int i = 0; i < 1000; i++)
    syms.push_back({shared, 0x1008 + static_cast<uint64_t>(i), 1,
                    ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, text});
  w.add_symbols(".symtab", ".strtab", syms, names);
  StringTable dyn;
  w.add_symbols(".dynsym", ".dynstr",
                {{dyn.add("exported"), 0x1010, 4,
                  ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, text}},
                dyn);
  w.add_build_id("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a");
  w.add_debuglink("sample.debug", 0xdeadbeef);
  return w;
}

TEST(ElfWriter, HeaderAndSegmentsReadBack) {
  ReadBack r(sample().bytes());
  ASSERT_EQ(elf_kind(r.elf()), ELF_K_ELF) << elf_errmsg(-1);
  GElf_Ehdr eh;
  ASSERT_TRUE(gelf_getehdr(r.elf(), &eh));
  EXPECT_EQ(eh.e_type, ET_DYN);
  EXPECT_EQ(eh.e_machine, EM_X86_64);
  size_t phnum = 0;
  ASSERT_EQ(elf_getphdrnum(r.elf(), &phnum), 0);
  ASSERT_EQ(phnum, 2u);

  GElf_Phdr text;
  ASSERT_TRUE(gelf_getphdr(r.elf(), 0, &text));
  EXPECT_EQ(text.p_type, PT_LOAD);
  EXPECT_EQ(text.p_flags, PF_R | PF_X);
  EXPECT_EQ(text.p_vaddr, 0x1000u);
  EXPECT_EQ(text.p_offset % 0x1000, 0u);
  EXPECT_EQ(text.p_filesz, 0x50u); // .text and .eh_frame
  EXPECT_EQ(text.p_memsz, 0x50u);

  GElf_Phdr far;
  ASSERT_TRUE(gelf_getphdr(r.elf(), 1, &far));
  EXPECT_EQ(far.p_vaddr, 1ull << 47); // written as given
  EXPECT_EQ(far.p_flags, PF_R | PF_W);
  EXPECT_EQ(far.p_filesz, 0u);
  EXPECT_EQ(far.p_memsz, 0x1000u);
}

TEST(ElfWriter, SectionsLandWhereTheSegmentMapsThem) {
  std::string bytes = sample().bytes();
  ReadBack r(bytes);
  GElf_Phdr text;
  ASSERT_TRUE(gelf_getphdr(r.elf(), 0, &text));
  for (const char *name : {".text", ".eh_frame"}) {
    Elf_Scn *scn = r.section(name);
    ASSERT_TRUE(scn) << name;
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    // The file byte behind each address is the section's own.
    EXPECT_EQ(sh.sh_offset - text.p_offset, sh.sh_addr - text.p_vaddr) << name;
  }
  EXPECT_EQ(r.content(".text"), std::string(64, '\xc3'));
  EXPECT_EQ(r.content(".eh_frame").size(), 16u);
}

TEST(ElfWriter, SymbolsShareOneName) {
  ReadBack r(sample().bytes());
  Elf_Scn *scn = r.section(".symtab");
  ASSERT_TRUE(scn);
  GElf_Shdr sh;
  gelf_getshdr(scn, &sh);
  EXPECT_EQ(sh.sh_type, SHT_SYMTAB);
  EXPECT_EQ(sh.sh_entsize, sizeof(Elf64_Sym));
  EXPECT_EQ(sh.sh_info, 2u); // the null symbol and local_fn
  Elf_Data *d = elf_getdata(scn, nullptr);
  ASSERT_TRUE(d);
  size_t n = sh.sh_size / sizeof(Elf64_Sym);
  ASSERT_EQ(n, 1002u);
  std::map<std::string, int> by_name;
  for (size_t i = 1; i < n; i++) {
    GElf_Sym s;
    ASSERT_TRUE(gelf_getsym(d, static_cast<int>(i), &s));
    by_name[elf_strptr(r.elf(), sh.sh_link, s.st_name)]++;
  }
  EXPECT_EQ(by_name[std::string(100, 'x')], 1000);
  EXPECT_EQ(by_name["local_fn"], 1);
  // The string table holds the shared name once.
  EXPECT_EQ(r.content(".strtab").size(), 1 + 101 + 9u);

  Elf_Scn *dyn = r.section(".dynsym");
  ASSERT_TRUE(dyn);
  gelf_getshdr(dyn, &sh);
  EXPECT_EQ(sh.sh_type, SHT_DYNSYM);
  GElf_Sym s;
  ASSERT_TRUE(gelf_getsym(elf_getdata(dyn, nullptr), 1, &s));
  EXPECT_STREQ(elf_strptr(r.elf(), sh.sh_link, s.st_name), "exported");
  EXPECT_EQ(s.st_value, 0x1010u);
  EXPECT_EQ(s.st_size, 4u);
}

TEST(ElfWriter, BuildIdAndDebuglink) {
  ReadBack r(sample().bytes());
  Elf_Scn *note = r.section(".note.gnu.build-id");
  ASSERT_TRUE(note);
  Elf_Data *d = elf_getdata(note, nullptr);
  GElf_Nhdr nh;
  size_t name_off = 0, desc_off = 0;
  ASSERT_GT(gelf_getnote(d, 0, &nh, &name_off, &desc_off), 0u);
  EXPECT_EQ(nh.n_type, NT_GNU_BUILD_ID);
  EXPECT_EQ(std::string(static_cast<char *>(d->d_buf) + desc_off, nh.n_descsz),
            "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a");

  std::string link = r.content(".gnu_debuglink");
  ASSERT_EQ(link.size(), 20u); // "sample.debug\0" padded to 16, then the CRC
  EXPECT_STREQ(link.c_str(), "sample.debug");
  uint32_t crc;
  memcpy(&crc, link.data() + 16, 4);
  EXPECT_EQ(crc, 0xdeadbeefu);
}

TEST(ElfWriter, DebuglinkCrcIsZlibs) {
  EXPECT_EQ(gnu_debuglink_crc(""), 0u);
  EXPECT_EQ(gnu_debuglink_crc("123456789"), 0xcbf43926u); // the check value
}

TEST(ElfWriter, WritesTheFile) {
  char path[] = "/tmp/elf_writer_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ElfWriter w = sample();
  ASSERT_TRUE(w.write(path));
  fd = open(path, O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string back(w.bytes().size() + 1, '\0');
  EXPECT_EQ(read(fd, &back[0], back.size()),
            static_cast<ssize_t>(w.bytes().size()));
  back.resize(w.bytes().size());
  EXPECT_EQ(back, w.bytes());
  close(fd);
  unlink(path);
}

} // namespace
} // namespace offcpu::test
