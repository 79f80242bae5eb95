#include "symbolize/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "symbolize/elf_common.h"
#include "symbolize/symbol_versions.h"
#include "util/fd.h"
#include "util/safe_file.h"

namespace offcpu {
namespace {

// Caps on what one file may make us hold; real binaries are far below.
constexpr size_t kMaxSections = 1u << 16;
constexpr size_t kMaxSymbols = 1u << 22;
constexpr size_t kMaxSymbolName = 4096;
constexpr size_t kMaxMiniDebugInfo = size_t{64} << 20;
// A symbol table (and its strings) larger than this is not read: it would
// be held in memory whole. kMaxSymbols entries of 24 bytes fit well below.
constexpr uint64_t kMaxTableBytes = uint64_t{512} << 20;

bool is_function(const GElf_Sym &sym) {
  int type = GELF_ST_TYPE(sym.st_info);
  return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
         sym.st_shndx != SHN_UNDEF && sym.st_value != 0;
}

// Whether section `index` exists and is at most `limit` bytes: libelf reads
// a section whole the first time it is used.
bool section_at_most(Elf *elf, size_t index, uint64_t limit) {
  GElf_Shdr shdr;
  Elf_Scn *scn = elf_getscn(elf, index);
  return scn && gelf_getshdr(scn, &shdr) && shdr.sh_size <= limit;
}

void read_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr &shdr,
                  std::vector<ElfSymbol> &out) {
  if (shdr.sh_size > kMaxTableBytes ||
      !section_at_most(elf, shdr.sh_link, kMaxTableBytes))
    return;
  Elf_Data *data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0)
    return;
  size_t count = data->d_size / shdr.sh_entsize;
  count = std::min(count, kMaxSymbols);
  for (size_t i = 0; i < count && out.size() < kMaxSymbols; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym) || !is_function(sym))
      continue;
    const char *name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || !*name)
      continue;
    size_t len = strnlen(name, kMaxSymbolName);
    out.push_back({sym.st_value, sym.st_size, std::string(name, len)});
  }
}

} // namespace

std::unique_ptr<ElfFile> ElfFile::open(const std::string &path) {
  FilePolicy any;
  any.follow_last_symlink = true;
  any.max_size = UINT64_MAX;
  CheckedFile f = open_checked(path, any);
  return f ? open_fd(f.fd.get()) : nullptr;
}

std::unique_ptr<ElfFile> ElfFile::open_fd(int fd) {
  if (!libelf_ready())
    return nullptr;
  struct stat st {};
  // Regular files only: a FIFO or device could block or never end.
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return nullptr;
  // ELF_C_READ reads with pread, never through a mapping: the file's owner
  // may truncate it while we read, which would raise SIGBUS on a mapping.
  // libelf also checks every section against the file's size.
  ElfHandle elf(elf_begin(fd, ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
    return nullptr;
  return from_elf(elf.get());
}

std::unique_ptr<ElfFile> ElfFile::open_memory(std::string image) {
  if (!libelf_ready() || image.empty())
    return nullptr;
  ElfHandle elf(elf_memory(image.data(), image.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
    return nullptr;
  return from_elf(elf.get());
}

void ElfFile::read_segments(void *handle) {
  Elf *elf = static_cast<Elf *>(handle);
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0)
    return;
  for (size_t i = 0; i < phnum && i < kMaxSections; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      segments_.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
  }
}

// .gnu_debuglink: a file name, padding to 4 bytes, the file's CRC-32.
void ElfFile::read_debuglink(const void *bytes, size_t size) {
  const char *p = static_cast<const char *>(bytes);
  size_t len = strnlen(p, size);
  size_t crc_off = (len + 4) & ~size_t{3};
  if (len == 0 || crc_off + 4 > size)
    return;
  debuglink_.assign(p, len);
  std::memcpy(&debuglink_crc_, p + crc_off, 4);
}

// The two sections found by name: MiniDebugInfo and the debug link.
void ElfFile::read_named_section(void *scn_handle, const char *name) {
  bool debugdata = name && std::strcmp(name, ".gnu_debugdata") == 0;
  bool debuglink = name && std::strcmp(name, ".gnu_debuglink") == 0;
  if (!debugdata && !debuglink)
    return;
  Elf_Data *data = elf_getdata(static_cast<Elf_Scn *>(scn_handle), nullptr);
  if (!data || !data->d_buf || data->d_size == 0 ||
      data->d_size >= kMaxMiniDebugInfo)
    return;
  if (debugdata)
    minidebuginfo_.assign(static_cast<const char *>(data->d_buf), data->d_size);
  else if (data->d_size >= 8)
    read_debuglink(data->d_buf, data->d_size);
}

std::unique_ptr<ElfFile> ElfFile::from_elf(void *handle) {
  Elf *elf = static_cast<Elf *>(handle); // borrowed: the caller ends it
  auto file = std::unique_ptr<ElfFile>(new ElfFile());
  file->read_segments(elf);
  std::vector<ElfSymbol> symtab, dynsym;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0 ||
      !section_at_most(elf, shstrndx, kMaxElfNoteBytes))
    shstrndx = 0;
  Elf_Scn *scn = nullptr;
  size_t sections = 0;
  while ((scn = elf_nextscn(elf, scn)) != nullptr &&
         sections++ < kMaxSections) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr))
      continue;
    if (shdr.sh_type == SHT_SYMTAB)
      read_symbols(elf, scn, shdr, symtab);
    else if (shdr.sh_type == SHT_DYNSYM)
      read_symbols(elf, scn, shdr, dynsym);
    else if (shdr.sh_type == SHT_NOTE && file->build_id_.empty() &&
             shdr.sh_size <= kMaxElfNoteBytes)
      file->build_id_ = gnu_build_id(scn);
    else if (shdr.sh_type == SHT_PROGBITS && shstrndx != 0 &&
             shdr.sh_size <= kMaxMiniDebugInfo)
      file->read_named_section(scn, elf_strptr(elf, shstrndx, shdr.sh_name));
  }
  // .symtab is a superset of .dynsym when present.
  file->has_symtab_ = !symtab.empty();
  file->symbols_ = std::move(file->has_symtab_ ? symtab : dynsym);
  file->finish_symbols();
  return file;
}

void ElfFile::finish_symbols() {
  // By address; among aliases, the sized one first so find() prefers it,
  // then the name people know (symbol_versions.h).
  std::sort(symbols_.begin(), symbols_.end(),
            [](const ElfSymbol &a, const ElfSymbol &b) {
              if (a.addr != b.addr)
                return a.addr < b.addr;
              if (a.size != b.size)
                return a.size > b.size;
              return better_alias(a, b);
            });
  symbols_.erase(std::unique(symbols_.begin(), symbols_.end(),
                             [](const ElfSymbol &a, const ElfSymbol &b) {
                               return a.addr == b.addr;
                             }),
                 symbols_.end());
  drop_symbol_versions(symbols_);
}

void ElfFile::adopt_symbols(ElfFile &&debug) {
  if (debug.symbols_.empty())
    return;
  symbols_ = std::move(debug.symbols_);
  has_symtab_ = has_symtab_ || debug.has_symtab_;
  finish_symbols();
}

std::optional<uint64_t> ElfFile::file_offset_to_vaddr(uint64_t offset) const {
  for (const Segment &s : segments_) {
    if (offset >= s.offset && offset - s.offset < s.filesz)
      return offset - s.offset + s.vaddr;
  }
  return std::nullopt;
}

const ElfSymbol *ElfFile::find(uint64_t vaddr) const {
  auto it = std::upper_bound(
      symbols_.begin(), symbols_.end(), vaddr,
      [](uint64_t a, const ElfSymbol &s) { return a < s.addr; });
  // The nearest symbol below may be a small one inside a larger function
  // (rare: local labels with FUNC type); look back a little for a cover.
  for (int back = 0; back < 4 && it != symbols_.begin(); back++) {
    --it;
    if (vaddr - it->addr < it->size || (it->size == 0 && vaddr == it->addr))
      return &*it;
  }
  return nullptr;
}

std::optional<uint32_t> file_crc32(int fd, uint64_t max_bytes,
                                   const std::function<bool()> &give_up) {
  uLong crc = crc32(0L, Z_NULL, 0);
  unsigned char buf[65536];
  uint64_t done = 0;
  for (unsigned chunk = 0;; chunk++) {
    if (chunk % 64 == 63 && give_up && give_up())
      return std::nullopt;
    ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    done += static_cast<uint64_t>(n);
    if (done > max_bytes)
      return std::nullopt;
    crc = crc32(crc, buf, static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

} // namespace offcpu
