#include "unwind/elf_cfi.h"

#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>

#include "symbolize/elf_common.h"

namespace offcpu::unwind {
namespace {

// CFI of the largest real libraries is a few MiB.
constexpr uint64_t kMaxCfiBytes = uint64_t{64} << 20;
constexpr size_t kMaxSections = 1u << 16;

std::string section_bytes(Elf_Scn *scn, bool decompress) {
  GElf_Shdr shdr;
  if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS ||
      shdr.sh_size > kMaxCfiBytes)
    return {};
  if (decompress && (shdr.sh_flags & SHF_COMPRESSED)) {
    // The header says how large it will be: bounded before inflating.
    Elf_Data *raw = elf_rawdata(scn, nullptr);
    GElf_Chdr chdr;
    if (!raw || !gelf_getchdr(scn, &chdr) || chdr.ch_size > kMaxCfiBytes ||
        elf_compress(scn, 0, 0) != 1)
      return {};
  }
  Elf_Data *data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf || data->d_size > kMaxCfiBytes)
    return {};
  return std::string(static_cast<const char *>(data->d_buf), data->d_size);
}

std::optional<ElfCfi> from_elf(Elf *elf, CfiWant want) {
  if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64)
    return std::nullopt;
  ElfCfi out;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) == 0)
    for (size_t i = 0; i < phnum && i < kMaxSections; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        out.loads.push_back(
            {ph.p_offset, ph.p_vaddr, ph.p_filesz, (ph.p_flags & PF_X) != 0});
    }
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0)
    return out;
  Elf_Scn *scn = nullptr;
  size_t n = 0;
  while ((scn = elf_nextscn(elf, scn)) != nullptr && n++ < kMaxSections) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr))
      continue;
    if (shdr.sh_type == SHT_NOTE && out.build_id.empty() &&
        shdr.sh_size <= kMaxElfNoteBytes) {
      out.build_id = gnu_build_id(scn);
      continue;
    }
    const char *name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!name)
      continue;
    if (std::strcmp(name, ".eh_frame") == 0 && shdr.sh_type != SHT_NOBITS) {
      out.eh_frame_size = shdr.sh_size;
      out.eh_frame_vaddr = shdr.sh_addr;
      if (want == CfiWant::EhFrame)
        out.eh_frame = section_bytes(scn, false);
    } else if (std::strcmp(name, ".debug_frame") == 0 &&
               want == CfiWant::DebugFile) {
      out.debug_frame = section_bytes(scn, true);
    } else if (std::strcmp(name, ".gnu_debuglink") == 0 &&
               shdr.sh_size <= 4096) {
      std::string link = section_bytes(scn, false);
      size_t len = strnlen(link.data(), link.size());
      size_t crc_off = (len + 4) & ~size_t{3};
      if (len > 0 && crc_off + 4 <= link.size()) {
        out.debuglink = link.substr(0, len);
        std::memcpy(&out.debuglink_crc, link.data() + crc_off, 4);
      }
    }
  }
  return out;
}

} // namespace

uint64_t ElfCfi::code_bytes() const {
  uint64_t n = 0;
  for (const Segment &s : loads)
    if (s.exec)
      n += s.filesz;
  return n;
}

std::optional<uint64_t> ElfCfi::vaddr_of_offset(uint64_t offset) const {
  // The kernel maps a segment from its offset rounded down to a page: a
  // mapping's offset names the segment that starts on that page, if any.
  for (const Segment &s : loads)
    if ((s.offset & ~uint64_t{0xfff}) == offset)
      return s.vaddr - (s.offset - offset);
  for (const Segment &s : loads)
    if (offset >= s.offset && offset - s.offset < s.filesz)
      return offset - s.offset + s.vaddr;
  return std::nullopt;
}

std::optional<ElfCfi> read_elf_cfi(int fd, CfiWant want) {
  struct stat st {};
  if (!libelf_ready() || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return std::nullopt;
  // ELF_C_READ: pread, never a mapping (a truncated file cannot SIGBUS).
  ElfHandle elf(elf_begin(fd, ELF_C_READ, nullptr));
  if (!elf)
    return std::nullopt;
  return from_elf(elf.get(), want);
}

std::optional<ElfCfi> read_elf_cfi_memory(const std::string &image) {
  if (!libelf_ready() || image.empty())
    return std::nullopt;
  std::string copy = image; // libelf may write to the buffer it is given
  ElfHandle elf(elf_memory(copy.data(), copy.size()));
  if (!elf)
    return std::nullopt;
  return from_elf(elf.get(), CfiWant::EhFrame);
}

} // namespace offcpu::unwind
