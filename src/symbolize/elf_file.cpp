#include "symbolize/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "symbolize/elf_common.h"
#include "symbolize/symbol_versions.h"
#include "util/clock.h"
#include "util/fd.h"
#include "util/safe_file.h"

namespace offcpu {
namespace {

// Caps on what one file may make us hold; real binaries are far below.
constexpr size_t kMaxSections = 1u << 16;
constexpr size_t kMaxSymbolName = 4096;
constexpr size_t kMaxMiniDebugInfo = size_t{64} << 20;
// The clock is read every this many symbols.
constexpr size_t kClockEvery = 1024;

bool is_function(const GElf_Sym &sym) {
  int type = GELF_ST_TYPE(sym.st_info);
  return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
         sym.st_shndx != SHN_UNDEF && sym.st_value != 0;
}

// Data objects (offcpu lock --futex names a futex word by the variable
// holding it); thread-local ones have offsets, not addresses.
bool is_data(const GElf_Sym &sym) {
  return GELF_ST_TYPE(sym.st_info) == STT_OBJECT && sym.st_shndx != SHN_UNDEF &&
         sym.st_value != 0 && sym.st_size != 0;
}

// Whether section `index` exists and is at most `limit` bytes: libelf reads
// a section whole the first time it is used.
bool section_at_most(Elf *elf, size_t index, uint64_t limit) {
  GElf_Shdr shdr;
  Elf_Scn *scn = elf_getscn(elf, index);
  return scn && gelf_getshdr(scn, &shdr) && shdr.sh_size <= limit;
}

// A symbol as read, before its name is copied.
struct RawSymbol {
  uint64_t addr, size;
  uint32_t name; // offset into the string table
};

// One symbol table's reading: its limits, its clock, where it records the
// first budget it ran out of.
struct TableRead {
  const SymbolLimits &limits;
  SymbolRunBudget *run; // null: no run-wide budget
  uint64_t start_ns;
  SymbolLoss &loss;

  void cut(SymbolLoss why) {
    if (loss == SymbolLoss::None)
      loss = why;
  }
  // Past the time limit, looked at every kClockEvery items.
  bool late(size_t i) const {
    return i % kClockEvery == kClockEvery - 1 &&
           monotonic_ns() - start_ns > limits.max_ns;
  }
};

// The function (or, with `data`, data object) entries of a table of
// `count` entries, within the symbol budgets (cheap: no name is copied yet).
std::vector<RawSymbol> function_entries(Elf_Data *data, size_t count,
                                        size_t strings_size, TableRead &t,
                                        bool objects) {
  std::vector<RawSymbol> raw;
  for (size_t i = 0; i < count; i++) {
    if (t.late(i)) {
      t.cut(SymbolLoss::Time);
      break;
    }
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym) ||
        !(objects ? is_data(sym) : is_function(sym)) || sym.st_name == 0 ||
        sym.st_name >= strings_size)
      continue;
    if (raw.size() >= t.limits.max_symbols) {
      t.cut(SymbolLoss::Symbols);
      break;
    }
    if (t.run && raw.size() >= t.run->symbols_left) {
      t.cut(SymbolLoss::RunBudget);
      break;
    }
    raw.push_back({sym.st_value, sym.st_size, sym.st_name});
  }
  return raw;
}

// The distinct names of the entries, each copied once.
struct NameCopies {
  struct Span {
    size_t pos = 0, len = 0;
  };
  std::vector<uint32_t> offsets; // in the string table, sorted
  std::vector<Span> spans;       // of each offset in `names` (len 0: none)
  std::vector<char> names;

  const Span &of(uint32_t offset) const {
    auto at = std::lower_bound(offsets.begin(), offsets.end(), offset);
    return spans[static_cast<size_t>(at - offsets.begin())];
  }
};

// Each distinct name once, in offset order; a name that would go past a
// budget is not copied (its symbols are dropped: their frames show as
// [module]).
NameCopies copy_names(const std::vector<RawSymbol> &raw, const char *strings,
                      size_t strings_size, TableRead &t) {
  NameCopies c;
  c.offsets.reserve(raw.size());
  for (const RawSymbol &r : raw)
    c.offsets.push_back(r.name);
  std::sort(c.offsets.begin(), c.offsets.end());
  c.offsets.erase(std::unique(c.offsets.begin(), c.offsets.end()),
                  c.offsets.end());
  c.spans.resize(c.offsets.size());
  for (size_t k = 0; k < c.offsets.size(); k++) {
    if (t.late(k)) {
      t.cut(SymbolLoss::Time);
      break;
    }
    const char *name = strings + c.offsets[k];
    size_t len =
        strnlen(name, std::min(kMaxSymbolName, strings_size - c.offsets[k]));
    if (t.run && len > t.run->name_bytes_left) {
      t.cut(SymbolLoss::RunBudget);
      break;
    }
    if (t.run)
      t.run->name_bytes_left -= len;
    c.spans[k] = {c.names.size(), len};
    c.names.insert(c.names.end(), name, name + len);
  }
  return c;
}

} // namespace

// Function symbols of one table, within the limits: entries first (cheap),
// then each distinct name copied once, then the views.
void ElfFile::read_symbols(void *handle, void *scn_handle,
                           const SymbolLimits &limits, SymbolRunBudget *run,
                           uint64_t start_ns, bool objects) {
  Elf *elf = static_cast<Elf *>(handle);
  std::vector<ElfSymbol> &symbols = objects ? data_symbols_ : symbols_;
  Elf_Scn *scn = static_cast<Elf_Scn *>(scn_handle);
  TableRead t{limits, run, start_ns, loss_};
  GElf_Shdr shdr;
  if (!gelf_getshdr(scn, &shdr) || shdr.sh_entsize == 0)
    return;
  if (shdr.sh_size > kMaxSymbolTableBytes ||
      !section_at_most(elf, shdr.sh_link, kMaxSymbolTableBytes)) {
    t.cut(SymbolLoss::TableTooLarge);
    return;
  }
  Elf_Data *data = elf_getdata(scn, nullptr);
  Elf_Scn *str_scn = elf_getscn(elf, shdr.sh_link);
  Elf_Data *str = str_scn ? elf_getdata(str_scn, nullptr) : nullptr;
  if (!data || !str || !str->d_buf || str->d_size == 0)
    return;
  const char *strings = static_cast<const char *>(str->d_buf);
  const size_t strings_size = str->d_size;
  // Entries as libelf reads them, whatever sh_entsize claims (1 would make
  // a loop of one step per byte).
  size_t entry = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  if (entry == 0)
    return;
  std::vector<RawSymbol> raw =
      function_entries(data, data->d_size / entry, strings_size, t, objects);
  NameCopies names = copy_names(raw, strings, strings_size, t);

  // The views, charged per use of each name.
  symbols.clear();
  symbols.reserve(raw.size());
  uint64_t name_bytes = 0;
  for (size_t i = 0; i < raw.size(); i++) {
    if (t.late(i)) {
      t.cut(SymbolLoss::Time);
      break;
    }
    const NameCopies::Span &sp = names.of(raw[i].name);
    if (sp.len == 0)
      continue;
    if (name_bytes + sp.len > limits.max_name_bytes) {
      t.cut(SymbolLoss::NameBytes);
      break;
    }
    name_bytes += sp.len;
    symbols.push_back({raw[i].addr, raw[i].size,
                       std::string_view(names.names.data() + sp.pos, sp.len)});
  }
  if (run)
    run->symbols_left -= std::min<uint64_t>(run->symbols_left, symbols.size());
  // The views stay valid: a vector moves its bytes.
  (objects ? data_names_ : names_) = std::move(names.names);
}

std::unique_ptr<ElfFile> ElfFile::open(const std::string &path) {
  FilePolicy any;
  any.follow_last_symlink = true;
  any.max_size = UINT64_MAX;
  CheckedFile f = open_checked(path, any);
  return f ? open_fd(f.fd.get()) : nullptr;
}

std::unique_ptr<ElfFile> ElfFile::open_fd(int fd, const SymbolLimits &limits,
                                          SymbolRunBudget *run) {
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
  return from_elf(elf.get(), limits, run);
}

std::unique_ptr<ElfFile> ElfFile::open_memory(std::string image,
                                              const SymbolLimits &limits,
                                              SymbolRunBudget *run) {
  if (!libelf_ready() || image.empty())
    return nullptr;
  ElfHandle elf(elf_memory(image.data(), image.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
    return nullptr;
  return from_elf(elf.get(), limits, run);
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

std::unique_ptr<ElfFile> ElfFile::from_elf(void *handle,
                                           const SymbolLimits &limits,
                                           SymbolRunBudget *run) {
  const uint64_t start_ns = monotonic_ns();
  Elf *elf = static_cast<Elf *>(handle); // borrowed: the caller ends it
  auto file = std::unique_ptr<ElfFile>(new ElfFile());
  file->read_segments(elf);
  Elf_Scn *symtab = nullptr, *dynsym = nullptr;
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
    if (shdr.sh_type == SHT_PROGBITS && shstrndx != 0 && shdr.sh_size > 0) {
      const char *name = elf_strptr(elf, shstrndx, shdr.sh_name);
      if (name && std::strcmp(name, ".debug_info") == 0)
        file->has_debug_info_ = true;
    }
    if (shdr.sh_type == SHT_SYMTAB && !symtab)
      symtab = scn;
    else if (shdr.sh_type == SHT_DYNSYM && !dynsym)
      dynsym = scn;
    else if (shdr.sh_type == SHT_NOTE && file->build_id_.empty() &&
             shdr.sh_size <= kMaxElfNoteBytes)
      file->build_id_ = gnu_build_id(scn);
    else if (shdr.sh_type == SHT_PROGBITS && shstrndx != 0 &&
             shdr.sh_size <= kMaxMiniDebugInfo)
      file->read_named_section(scn, elf_strptr(elf, shstrndx, shdr.sh_name));
  }
  // .symtab is a superset of .dynsym when present: one table is read, and
  // .dynsym only if .symtab gives nothing.
  if (symtab)
    file->read_symbols(elf, symtab, limits, run, start_ns, false);
  file->has_symtab_ = !file->symbols_.empty();
  if (!file->has_symtab_ && dynsym)
    file->read_symbols(elf, dynsym, limits, run, start_ns, false);
  if (limits.data_symbols && (symtab || dynsym))
    file->read_symbols(elf, symtab ? symtab : dynsym, limits, run, start_ns,
                       true);
  file->finish_symbols();
  return file;
}

void ElfFile::finish_symbols() {
  std::sort(data_symbols_.begin(), data_symbols_.end(),
            [](const ElfSymbol &a, const ElfSymbol &b) {
              return a.addr != b.addr ? a.addr < b.addr : a.size > b.size;
            });
  // By address, the sized symbol first; then one per address: among the
  // largest at it, the name people know (symbol_versions.h). Names are
  // compared within an address only, so a file with many aliases of long
  // names costs each name a few scans, not one per comparison of a sort.
  std::sort(symbols_.begin(), symbols_.end(),
            [](const ElfSymbol &a, const ElfSymbol &b) {
              return a.addr != b.addr ? a.addr < b.addr : a.size > b.size;
            });
  size_t out = 0;
  for (size_t i = 0; i < symbols_.size();) {
    size_t best = i, j = i + 1;
    for (; j < symbols_.size() && symbols_[j].addr == symbols_[i].addr; j++)
      if (symbols_[j].size == symbols_[i].size &&
          better_alias(symbols_[j], symbols_[best]))
        best = j;
    symbols_[out++] = symbols_[best];
    i = j;
  }
  symbols_.resize(out);
  drop_symbol_versions(symbols_);
}

void ElfFile::adopt_symbols(ElfFile &&debug) {
  if (!debug.data_symbols_.empty()) {
    data_symbols_ = std::move(debug.data_symbols_);
    data_names_ = std::move(debug.data_names_);
  }
  if (debug.symbols_.empty())
    return;
  symbols_ = std::move(debug.symbols_);
  names_ = std::move(debug.names_);
  has_symtab_ = has_symtab_ || debug.has_symtab_;
  loss_ = debug.loss_;
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

std::optional<uint64_t> ElfFile::load_bias(uint64_t start, uint64_t offset,
                                           uint64_t size) const {
  // A segment's file bytes and the mapping's overlap: both then move
  // addresses by the same amount from their file offsets.
  for (const Segment &s : segments_)
    if (s.filesz && s.offset < offset + size && offset < s.offset + s.filesz)
      return (start - offset) - (s.vaddr - s.offset);
  return std::nullopt;
}

const ElfSymbol *ElfFile::find_data(uint64_t vaddr) const {
  auto it = std::upper_bound(
      data_symbols_.begin(), data_symbols_.end(), vaddr,
      [](uint64_t a, const ElfSymbol &s) { return a < s.addr; });
  // A member of a larger object may have a symbol of its own below: look
  // back a little for the object that covers the address.
  for (int back = 0; back < 4 && it != data_symbols_.begin(); back++) {
    --it;
    if (vaddr - it->addr < it->size)
      return &*it;
  }
  return nullptr;
}

} // namespace offcpu
