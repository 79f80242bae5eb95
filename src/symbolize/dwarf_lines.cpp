#include "symbolize/dwarf_lines.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "symbolize/demangle.h"
#include "util/clock.h"
#include "util/fd.h"

namespace offcpu {
namespace {

// Address ranges of units kept at most (a unit has one to a few hundred).
constexpr size_t kMaxRanges = size_t{1} << 22;
// Nesting followed at most (namespaces, classes, blocks, inlined calls).
constexpr size_t kMaxDepth = 256;
// Function ranges kept per file, all units together.
constexpr uint64_t kMaxFunctionRanges = uint64_t{1} << 22;
// Ranges looked at before the one found, for overlapping units.
constexpr size_t kOverlapScan = 16;
// What reading DWARF sections costs, roughly (about 4 ms per MiB read and
// inflated on this VM; twice that, to be safe).
constexpr uint64_t kNsPerDwarfByte = 8;
// The clock is read every this many DIEs or units.
constexpr uint64_t kClockEvery = 256;
// Line rows at one address looked back over for a statement.
constexpr size_t kStatementScan = 64;

bool starts_with(const char *s, const char *prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

bool ends_with(const char *s, const char *suffix) {
  size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

// What the DWARF sections will cost libdw, and whether libdw would go
// looking for other files (dwz's shared file, split DWARF's .dwo files:
// it opens those by path itself). `has_info`: there is DWARF at all.
struct SectionCheck {
  uint64_t bytes = 0;
  uint64_t inflated = 0; // of `bytes`, those of compressed sections
  bool has_info = false;
  bool other_files = false;
  bool unreadable = false;
};

// The sections the lookups here read: units and their DIEs, line tables,
// strings, address ranges. The others libdw would read (and inflate) as
// well, though nothing here asks for them: location lists (in an optimized
// build's DWARF the largest after .debug_info: 1.4 of libc's 10 MB),
// .debug_aranges (units are indexed here), CFI, macros, name indexes.
bool section_used(const char *name) {
  static const char *const kUsed[] = {
      ".debug_info",     ".debug_abbrev",      ".debug_line", ".debug_line_str",
      ".debug_str",      ".debug_str_offsets", ".debug_addr", ".debug_ranges",
      ".debug_rnglists", ".debug_types",
  };
  for (const char *used : kUsed)
    if (std::strcmp(name, used) == 0)
      return true;
  return false;
}

// Checks the sections, and hides from libdw those the lookups do not use:
// libdw skips a section marked NOBITS instead of reading it (the change is
// to libelf's copy of the headers, never written back).
SectionCheck check_sections(Elf *elf, bool lines) {
  SectionCheck c;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
    c.unreadable = true;
    return c;
  }
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn;
       scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr))
      continue;
    const char *name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!name)
      continue;
    if (std::strcmp(name, ".gnu_debugaltlink") == 0 || ends_with(name, ".dwo"))
      c.other_files = true;
    const bool debug = starts_with(name, ".debug_");
    if (!debug && !starts_with(name, ".zdebug_"))
      continue;
    if (shdr.sh_type == SHT_NOBITS)
      continue;
    if (!debug) {
      // The old GNU compression: its size hides in the data; not produced
      // by any current toolchain, so not read.
      c.unreadable = true;
      continue;
    }
    if (!section_used(name) ||
        (!lines && (std::strcmp(name, ".debug_line") == 0 ||
                    std::strcmp(name, ".debug_line_str") == 0))) {
      shdr.sh_type = SHT_NOBITS;
      if (!gelf_update_shdr(scn, &shdr))
        c.unreadable = true;
      continue;
    }
    if (std::strcmp(name, ".debug_info") == 0)
      c.has_info = shdr.sh_size > 0;
    uint64_t size = shdr.sh_size;
    if (shdr.sh_flags & SHF_COMPRESSED) {
      // libdw inflates it: what it claims to become is what it costs.
      GElf_Chdr chdr;
      if (!gelf_getchdr(scn, &chdr)) {
        c.unreadable = true;
        continue;
      }
      size = std::max<uint64_t>(size, chdr.ch_size);
      c.inflated += size;
    }
    c.bytes += size;
  }
  return c;
}

bool is_function(int tag) {
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

// Scopes whose address ranges hold their children's code.
bool is_code_scope(int tag) {
  return is_function(tag) || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

// Scopes without addresses that may hold function definitions (C++).
bool is_container(int tag) {
  return tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
         tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
         tag == DW_TAG_module;
}

const char *string_attr(Dwarf_Die *die, int name) {
  Dwarf_Attribute attr;
  if (!dwarf_attr_integrate(die, static_cast<unsigned>(name), &attr))
    return nullptr;
  return dwarf_formstring(&attr);
}

bool udata_attr(Dwarf_Die *die, int name, Dwarf_Word *out) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, static_cast<unsigned>(name), &attr) &&
         dwarf_formudata(&attr, out) == 0;
}

} // namespace

struct DwarfFile::Impl {
  UniqueFd fd;       // ours (a duplicate), for libelf's preads
  std::string image; // or the bytes, for open_memory
  Elf *elf = nullptr;
  Dwarf *dwarf = nullptr;
  ~Impl() {
    if (dwarf)
      dwarf_end(dwarf);
    if (elf)
      elf_end(elf);
  }
};

namespace {

// libelf over a file of ours: root's, written by no one else, is mapped
// (ELF_C_READ_MMAP), so only the pages libdw touches are read in, not the
// whole of every section (a RelWithDebInfo offcpu's own 39 MB of DWARF,
// for a few lookups, was the peak of a whole-system run, issue #27). Any
// other file is read with pread into memory of libelf's: its owner could
// truncate a mapped file under us (SIGBUS).
Elf *begin_elf(int fd) {
  struct stat st {};
  const bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  return elf_begin(fd, ours ? ELF_C_READ_MMAP : ELF_C_READ, nullptr);
}

} // namespace

DwarfFile::DwarfFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DwarfFile::~DwarfFile() = default;

std::unique_ptr<DwarfFile> DwarfFile::open_fd(int fd, const DwarfLimits &limits,
                                              DwarfRunBudget *run,
                                              uint64_t deadline_ns,
                                              DwarfLoss *why) {
  *why = DwarfLoss::None;
  auto impl = std::make_unique<Impl>();
  impl->fd = UniqueFd(fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!impl->fd)
    return nullptr;
  elf_version(EV_CURRENT);
  impl->elf = begin_elf(impl->fd.get());
  return from_impl(std::move(impl), limits, run, deadline_ns, why);
}

std::unique_ptr<DwarfFile> DwarfFile::open_memory(std::string image,
                                                  const DwarfLimits &limits,
                                                  DwarfRunBudget *run,
                                                  DwarfLoss *why) {
  *why = DwarfLoss::None;
  auto impl = std::make_unique<Impl>();
  impl->image = std::move(image);
  elf_version(EV_CURRENT);
  impl->elf = elf_memory(impl->image.data(), impl->image.size());
  return from_impl(std::move(impl), limits, run, 0, why);
}

std::unique_ptr<DwarfFile> DwarfFile::from_impl(std::unique_ptr<Impl> impl,
                                                const DwarfLimits &limits,
                                                DwarfRunBudget *run,
                                                uint64_t deadline_ns,
                                                DwarfLoss *why) {
  if (!impl->elf || elf_kind(impl->elf) != ELF_K_ELF)
    return nullptr;
  const uint64_t start = monotonic_ns();
  SectionCheck c = check_sections(impl->elf, limits.lines);
  if (!c.has_info)
    return nullptr; // no DWARF: nothing lost
  if (c.other_files) {
    *why = DwarfLoss::OtherFiles;
    return nullptr;
  }
  if (c.unreadable) {
    *why = DwarfLoss::Malformed;
    return nullptr;
  }
  if (c.bytes > limits.max_bytes) {
    *why = DwarfLoss::TooLarge;
    return nullptr;
  }
  if (run && c.bytes > run->bytes_left) {
    *why = DwarfLoss::RunBudget;
    return nullptr;
  }
  // libdw reads (and inflates) the sections in one call that cannot be
  // interrupted: not begun when the deadline would not leave it the time
  // it is likely to take.
  if (deadline_ns && start + c.bytes * kNsPerDwarfByte >= deadline_ns) {
    *why = DwarfLoss::Time;
    return nullptr;
  }
  impl->dwarf = dwarf_begin_elf(impl->elf, DWARF_C_READ, nullptr);
  if (!impl->dwarf) {
    *why = DwarfLoss::Malformed;
    return nullptr;
  }
  if (run)
    run->bytes_left -= c.bytes;
  std::unique_ptr<DwarfFile> file(new DwarfFile(std::move(impl)));
  file->limits_ = limits;
  file->run_ = run;
  file->section_bytes_ = c.bytes;
  file->inflated_bytes_ = c.inflated;
  file->spent_ns_ = monotonic_ns() - start;
  if (!file->index_units(deadline_ns)) {
    *why = file->loss_ != DwarfLoss::None ? file->loss_ : DwarfLoss::OtherFiles;
    return nullptr;
  }
  return file;
}

bool DwarfFile::out_of_time(uint64_t deadline_ns) {
  if (loss_ == DwarfLoss::Time)
    return true;
  const uint64_t now = monotonic_ns();
  if (spent_ns_ > limits_.max_ns || (deadline_ns && now >= deadline_ns)) {
    loss_ = DwarfLoss::Time;
    return true;
  }
  return false;
}

// Every compile unit's address ranges, sorted: the index lookups start
// from (.debug_aranges is optional, and not produced by every compiler).
// False if the file holds skeleton or split units (libdw would open their
// .dwo files by path) or its time ran out.
bool DwarfFile::index_units(uint64_t deadline_ns) {
  const uint64_t start = monotonic_ns();
  const uint64_t before = spent_ns_;
  Dwarf_CU *cu = nullptr;
  Dwarf_CU *next = nullptr;
  uint64_t n = 0;
  bool ok = true;
  for (;;) {
    Dwarf_Half version = 0;
    uint8_t unit_type = 0;
    Dwarf_Die cudie;
    if (dwarf_get_units(impl_->dwarf, cu, &next, &version, &unit_type, &cudie,
                        nullptr) != 0)
      break;
    cu = next;
    if (++n % kClockEvery == 0) {
      spent_ns_ = before + (monotonic_ns() - start);
      if (out_of_time(deadline_ns)) {
        ok = false;
        break;
      }
    }
    if (unit_type == DW_UT_skeleton || unit_type == DW_UT_split_compile ||
        unit_type == DW_UT_split_type) {
      ok = false;
      break;
    }
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
      continue;
    Dwarf_Addr base = 0, low = 0, high = 0;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(&cudie, off, &base, &low, &high)) > 0) {
      if (units_.size() >= kMaxRanges)
        break;
      if (low != 0 && high > low)
        units_.push_back({low, high, dwarf_dieoffset(&cudie)});
    }
  }
  spent_ns_ = before + (monotonic_ns() - start);
  std::sort(units_.begin(), units_.end(),
            [](const Range &a, const Range &b) { return a.low < b.low; });
  return ok;
}

void DwarfFile::release() {
  if (!impl_ || !impl_->image.empty() || !impl_->dwarf)
    return;
  dwarf_end(impl_->dwarf);
  impl_->dwarf = nullptr;
  elf_end(impl_->elf);
  impl_->elf = nullptr;
}

bool DwarfFile::released() const {
  return impl_ && !impl_->dwarf;
}

bool DwarfFile::reopen() {
  if (impl_->dwarf)
    return true;
  reopens_++;
  impl_->elf = begin_elf(impl_->fd.get());
  if (impl_->elf && elf_kind(impl_->elf) == ELF_K_ELF) {
    SectionCheck c = check_sections(impl_->elf, limits_.lines);
    if (c.has_info && !c.other_files && !c.unreadable &&
        c.bytes <= limits_.max_bytes) {
      impl_->dwarf = dwarf_begin_elf(impl_->elf, DWARF_C_READ, nullptr);
      section_bytes_ = c.bytes;
      inflated_bytes_ = c.inflated;
    }
  }
  if (impl_->dwarf)
    return true;
  if (impl_->elf)
    elf_end(impl_->elf);
  impl_->elf = nullptr;
  loss_ = DwarfLoss::Malformed;
  return false;
}

const std::string *DwarfFile::intern(const char *s) {
  if (!s || !*s)
    return nullptr;
  return &*strings_.emplace(s).first;
}

const std::vector<SourceFrame> &DwarfFile::frames_at(uint64_t vaddr,
                                                     uint64_t deadline_ns) {
  static const std::vector<SourceFrame> none;
  auto it = cache_.find(vaddr);
  if (it != cache_.end())
    return it->second;
  if (out_of_time(deadline_ns) || loss_ == DwarfLoss::Malformed)
    return none;
  // Reading the sections again is not the file's lookups' time: the
  // loader chose to free them (its files' sections held up to a budget).
  if (!reopen())
    return none;
  const uint64_t start = monotonic_ns();
  std::vector<SourceFrame> chain = look_up(vaddr, deadline_ns);
  spent_ns_ += monotonic_ns() - start;
  uint64_t left = run_ ? run_->lookups_cached_left.load() : 1;
  while (left > 0 && run_ &&
         !run_->lookups_cached_left.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) {
    // Past the run's share of cached answers: answered, not kept.
    thread_local std::vector<SourceFrame> uncached;
    uncached = std::move(chain);
    return uncached;
  }
  return cache_.emplace(vaddr, std::move(chain)).first->second;
}

namespace {

// The range of `ranges` (sorted by low) that holds `a`: the last starting
// at or below it, looking back past a few overlapping ones.
template <class R>
const R *range_holding(const std::vector<R> &ranges, uint64_t a) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), a,
                             [](uint64_t v, const R &r) { return v < r.low; });
  for (size_t k = 0; k < kOverlapScan && it != ranges.begin(); k++) {
    --it;
    if (a >= it->low && a < it->high)
      return &*it;
  }
  return nullptr;
}

// From out-of-line function `fn` down into the scopes that hold `vaddr`,
// keeping the functions inlined on the way in `path` (fn first). At most
// `max_dies` visited; `late` is asked every kClockEvery of them. False if
// it said the time is up.
bool scopes_holding(Dwarf_Die fn, uint64_t vaddr, uint64_t max_dies,
                    const std::function<bool()> &late,
                    std::vector<Dwarf_Die> &path) {
  path.push_back(fn);
  uint64_t visited = 0;
  Dwarf_Die die;
  bool more = dwarf_child(&fn, &die) == 0;
  while (more) {
    if (++visited > max_dies)
      break;
    if (visited % kClockEvery == 0 && late())
      return false;
    const int tag = dwarf_tag(&die);
    Dwarf_Die child;
    if (is_code_scope(tag) && dwarf_haspc(&die, vaddr) > 0) {
      if (is_function(tag))
        path.push_back(die);
      if (path.size() > kMaxDepth || dwarf_child(&die, &child) != 0)
        break; // the innermost scope holding vaddr
      die = child;
      continue;
    }
    Dwarf_Die sibling;
    more = dwarf_siblingof(&die, &sibling) == 0;
    if (more)
      die = sibling;
  }
  return true;
}

using Intern = std::function<const std::string *(const char *)>;

// One frame of `path` (i: its place, root first): its function, where it
// starts, and its line: where the next was inlined into it, or the leaf's.
SourceFrame frame_of(std::vector<Dwarf_Die> &path, size_t i,
                     const Intern &intern,
                     const std::function<const std::string *(Dwarf_Word)> &file,
                     const std::string *leaf_file, uint32_t leaf_line,
                     bool lines) {
  Dwarf_Die *d = &path[i];
  SourceFrame f;
  const char *linkage = string_attr(d, DW_AT_linkage_name);
  if (!linkage)
    linkage = string_attr(d, DW_AT_MIPS_linkage_name);
  // The linkage name, as the ELF symbol and gdb name it (glibc's
  // __GI___poll, C++'s namespaces and parameters), else the plain name.
  if (linkage)
    f.function = intern(demangle(linkage).c_str());
  else
    f.function = intern(string_attr(d, DW_AT_name));
  int decl = 0;
  if (dwarf_decl_line(d, &decl) == 0 && decl > 0)
    f.start_line = static_cast<uint32_t>(decl);
  if (lines)
    f.decl_file = intern(dwarf_decl_file(d));
  if (i + 1 < path.size()) {
    // A caller's line is where the next function was inlined into it.
    Dwarf_Word call_line = 0, call_file = 0;
    if (udata_attr(&path[i + 1], DW_AT_call_line, &call_line))
      f.line = static_cast<uint32_t>(call_line);
    if (udata_attr(&path[i + 1], DW_AT_call_file, &call_file))
      f.file = file(call_file);
  } else {
    f.line = leaf_line;
    f.file = leaf_file;
  }
  return f;
}

// The line table's row for `vaddr` as gdb picks it: the last row at or
// below it, unless that row is not a statement and a statement row at the
// same address precedes it (GCC gives one address several rows, the later
// ones often not statements: gdb, and the source, mean the statement's).
// libdw's dwarf_getsrc_die would take the last row alone.
Dwarf_Line *line_at(Dwarf_Die *cudie, uint64_t vaddr) {
  Dwarf_Lines *lines = nullptr;
  size_t n = 0;
  if (dwarf_getsrclines(cudie, &lines, &n) != 0 || n == 0)
    return nullptr;
  auto addr_of = [&](size_t i, Dwarf_Addr *a) {
    Dwarf_Line *l = dwarf_onesrcline(lines, i);
    return l && dwarf_lineaddr(l, a) == 0 ? l : nullptr;
  };
  // The rows are sorted by address (libdw sorts them for its own search).
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    Dwarf_Addr a = 0;
    if (!addr_of(mid, &a))
      return nullptr;
    if (a <= vaddr)
      lo = mid + 1;
    else
      hi = mid;
  }
  Dwarf_Addr at = 0;
  Dwarf_Line *best = lo > 0 ? addr_of(lo - 1, &at) : nullptr;
  bool flag = false;
  if (!best || (dwarf_lineendsequence(best, &flag) == 0 && flag))
    return nullptr;
  if (dwarf_linebeginstatement(best, &flag) != 0 || flag)
    return best;
  // A few rows back at most: a hostile table may hold millions at one
  // address.
  for (size_t i = lo - 1, k = 0; i-- > 0 && k < kStatementScan; k++) {
    Dwarf_Addr a = 0;
    Dwarf_Line *l = addr_of(i, &a);
    int no = 0;
    if (!l || a != at || dwarf_lineno(l, &no) != 0 || no == 0 ||
        (dwarf_lineendsequence(l, &flag) == 0 && flag))
      break;
    if (dwarf_linebeginstatement(l, &flag) == 0 && flag)
      return l;
  }
  return best;
}

// The frames of `path` (the scopes holding vaddr in unit `cudie`), each
// with its line (`lines`; else functions alone).
std::vector<SourceFrame> frames_of(std::vector<Dwarf_Die> &path,
                                   Dwarf_Die *cudie, uint64_t vaddr,
                                   const Intern &intern, bool lines) {
  std::vector<SourceFrame> out;
  // The unit's file table, for DW_AT_call_file.
  Dwarf_Files *files = nullptr;
  size_t nfiles = 0;
  if (lines && dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
    files = nullptr;
  auto file_name = [&](Dwarf_Word index) -> const std::string * {
    if (!files || index >= nfiles)
      return nullptr;
    return intern(dwarf_filesrc(files, index, nullptr, nullptr));
  };
  // The leaf's current line, from the line table.
  const std::string *leaf_file = nullptr;
  uint32_t leaf_line = 0;
  if (Dwarf_Line *line = lines ? line_at(cudie, vaddr) : nullptr) {
    int n = 0;
    if (dwarf_lineno(line, &n) == 0 && n > 0)
      leaf_line = static_cast<uint32_t>(n);
    leaf_file = intern(dwarf_linesrc(line, nullptr, nullptr));
  }
  if (path.empty()) {
    // Code without a function in DWARF (assembly): its line only.
    if (leaf_line)
      out.push_back({nullptr, leaf_file, nullptr, leaf_line, 0});
    return out;
  }
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); i++)
    out.push_back(
        frame_of(path, i, intern, file_name, leaf_file, leaf_line, lines));
  return out;
}

} // namespace

std::vector<SourceFrame> DwarfFile::look_up(uint64_t vaddr,
                                            uint64_t deadline_ns) {
  const Range *found = range_holding(units_, vaddr);
  Dwarf_Die cudie;
  if (!found || !dwarf_offdie(impl_->dwarf, found->offset, &cudie))
    return {};
  // The out-of-line function holding vaddr, then down from it into the
  // scopes that hold vaddr, keeping the functions inlined on the way.
  std::vector<Dwarf_Die> path;
  const std::vector<Range> *fns = functions_of(found->offset, deadline_ns);
  const Range *holder = fns ? range_holding(*fns, vaddr) : nullptr;
  Dwarf_Die fn;
  if (holder && dwarf_offdie(impl_->dwarf, holder->offset, &fn)) {
    const uint64_t start = monotonic_ns();
    const uint64_t before = spent_ns_;
    auto late = [&] {
      spent_ns_ = before + (monotonic_ns() - start);
      return out_of_time(deadline_ns);
    };
    if (!scopes_holding(fn, vaddr, limits_.max_dies_per_lookup, late, path))
      return {};
    spent_ns_ = before;
  }
  // Keep only the last out-of-line function and what is inlined into it.
  size_t first = 0;
  for (size_t i = 0; i < path.size(); i++)
    if (dwarf_tag(&path[i]) == DW_TAG_subprogram)
      first = i;
  path.erase(path.begin(), path.begin() + static_cast<long>(first));
  return frames_of(
      path, &cudie, vaddr, [this](const char *s) { return intern(s); },
      limits_.lines);
}

// The unit's out-of-line functions and their ranges, in one walk of its
// top level (and of namespaces and classes, where C++ may define them).
const std::vector<DwarfFile::Range> *
DwarfFile::functions_of(uint64_t cu_offset, uint64_t deadline_ns) {
  auto it = functions_.find(cu_offset);
  if (it != functions_.end())
    return &it->second;
  Dwarf_Die cudie;
  if (!dwarf_offdie(impl_->dwarf, cu_offset, &cudie))
    return nullptr;
  const uint64_t start = monotonic_ns();
  const uint64_t before = spent_ns_;
  std::vector<Range> fns;
  std::vector<Dwarf_Die> containers; // entered, to resume at their siblings
  uint64_t visited = 0;
  Dwarf_Die die;
  bool more = dwarf_child(&cudie, &die) == 0;
  while (more) {
    if (++visited % kClockEvery == 0) {
      spent_ns_ = before + (monotonic_ns() - start);
      if (out_of_time(deadline_ns))
        return nullptr; // read again by no one: the file's time is spent
    }
    const int tag = dwarf_tag(&die);
    Dwarf_Die child;
    if (tag == DW_TAG_subprogram) {
      Dwarf_Addr base = 0, low = 0, high = 0;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&die, off, &base, &low, &high)) > 0 &&
             functions_kept_ < kMaxFunctionRanges)
        if (low != 0 && high > low) {
          fns.push_back({low, high, dwarf_dieoffset(&die)});
          functions_kept_++;
        }
    } else if (is_container(tag) && containers.size() < kMaxDepth &&
               dwarf_child(&die, &child) == 0) {
      containers.push_back(die);
      die = child;
      continue;
    }
    Dwarf_Die sibling;
    while (dwarf_siblingof(&die, &sibling) != 0) {
      if (containers.empty()) {
        more = false;
        break;
      }
      die = containers.back();
      containers.pop_back();
    }
    if (more)
      die = sibling;
  }
  spent_ns_ = before; // frames_at counts the whole lookup
  std::sort(fns.begin(), fns.end(),
            [](const Range &a, const Range &b) { return a.low < b.low; });
  return &functions_.emplace(cu_offset, std::move(fns)).first->second;
}

std::string source_base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace offcpu
