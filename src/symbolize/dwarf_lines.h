// Inlined functions and source lines from one file's DWARF, read with
// elfutils' libdw (issue #31). The file belongs to another user and libdw
// is not hardened against hostile input, so what it is handed is bounded:
// the DWARF sections' size is checked before libdw sees them, every walk
// counts the DIEs it visits and reads the clock, and files that would make
// libdw open other files by path (dwz's .gnu_debugaltlink, split DWARF's
// .dwo) are not read: libdw gets a descriptor we opened, nothing else.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace offcpu {

// One function of the chain at an address: the function holding the code,
// then each one inlined into it, innermost last.
struct SourceFrame {
  const std::string *function = nullptr;  // demangled; null: DWARF has none
  const std::string *file = nullptr;      // of `line`; null: unknown
  const std::string *decl_file = nullptr; // where the function is defined
  uint32_t line = 0;       // this frame's current line (a call site's)
  uint32_t start_line = 0; // the function's first line (DW_AT_decl_line)
};

// What one file's DWARF may cost.
struct DwarfLimits {
  // The .debug_* sections handed to libdw, which reads them whole.
  uint64_t max_bytes = uint64_t{512} << 20;
  // Indexing the file's units, then every lookup in it, together.
  uint64_t max_ns = 1000000000;
  // DIEs one lookup may visit.
  uint64_t max_dies_per_lookup = uint64_t{1} << 18;
  // Each frame's source file and line (--lines, pprof). Off, the line
  // tables (.debug_line) are neither read nor inflated: libc's debug file
  // held 4.9 MiB of parsed line programs at a run's peak for frames named
  // by function only (issue #27).
  bool lines = true;
};

// The run's share, spent by every DWARF file. Files are opened on one
// thread (DwarfLoader's); lookups may run on two (the loader warming one
// file's cache while the caller looks up in another).
struct DwarfRunBudget {
  uint64_t bytes_left = uint64_t{1} << 30;
  std::atomic<uint64_t> lookups_cached_left{uint64_t{1} << 21};
};

// Why a file's DWARF was not used, or used in part.
enum class DwarfLoss {
  None,
  TooLarge,   // its DWARF sections over DwarfLimits::max_bytes
  RunBudget,  // the run's bytes spent by other files
  OtherFiles, // dwz or split DWARF: libdw would open files by path
  Malformed,  // libdw refused it
  Time,       // over DwarfLimits::max_ns (or the caller's deadline)
  // Not opened: more files with DWARF than the descriptors kept for them
  // (symbolizer.cpp, kMaxIdleDwarf and kMaxDwarfFiles).
  Descriptors,
  Count
};

class DwarfFile {
public:
  // The DWARF of the ELF file open as `fd` (checked: util/safe_file.h;
  // read with pread, never mapped). Null, with `why` set, if it has none
  // usable. `deadline_ns` (CLOCK_MONOTONIC, 0: none) also ends the work.
  static std::unique_ptr<DwarfFile> open_fd(int fd, const DwarfLimits &limits,
                                            DwarfRunBudget *run,
                                            uint64_t deadline_ns,
                                            DwarfLoss *why);
  // The same for an image in memory (fuzzing, tests).
  static std::unique_ptr<DwarfFile> open_memory(std::string image,
                                                const DwarfLimits &limits,
                                                DwarfRunBudget *run,
                                                DwarfLoss *why);
  ~DwarfFile();
  DwarfFile(const DwarfFile &) = delete;
  DwarfFile &operator=(const DwarfFile &) = delete;

  // The chain at `vaddr` (as the ELF file numbers addresses; a return
  // address less one for callers), root first: the holder, then what is
  // inlined into it. Empty if DWARF does not cover it. Cached per address.
  const std::vector<SourceFrame> &frames_at(uint64_t vaddr,
                                            uint64_t deadline_ns = 0);

  // Frees what libdw holds (the sections it read and inflated: most of a
  // file's cost, 12 MiB for glibc's debug file) and keeps the answers and
  // the unit index: an address asked before needs nothing more. Another
  // address opens the file again from our descriptor (its sections checked
  // again: its owner may have rewritten it). Files in memory are kept.
  void release();
  bool released() const;
  // Times the file was opened again after release().
  uint64_t reopens() const { return reopens_; }
  // The sections libdw reads while it is open (what holding it costs),
  // and of those the compressed ones' inflated size (what reading it again
  // costs: inflating glibc's 7 MB took 50-65 ms, reading plain sections
  // a fraction of a ms).
  uint64_t section_bytes() const { return section_bytes_; }
  uint64_t inflated_bytes() const { return inflated_bytes_; }

  // Set once the file's time ran out: later lookups answer empty.
  DwarfLoss loss() const { return loss_; }
  size_t unit_count() const { return units_.size(); }

private:
  struct Impl;
  struct Range {
    uint64_t low, high; // [low, high)
    uint64_t offset;    // of the unit's (or function's) DIE
  };
  explicit DwarfFile(std::unique_ptr<Impl> impl);
  static std::unique_ptr<DwarfFile>
  from_impl(std::unique_ptr<Impl> impl, const DwarfLimits &limits,
            DwarfRunBudget *run, uint64_t deadline_ns, DwarfLoss *why);
  bool index_units(uint64_t deadline_ns);
  // libdw again after release(); false (Malformed: the file changed) if
  // it fails.
  bool reopen();
  std::vector<SourceFrame> look_up(uint64_t vaddr, uint64_t deadline_ns);
  const std::vector<Range> *functions_of(uint64_t cu_offset,
                                         uint64_t deadline_ns);
  const std::string *intern(const char *s);
  bool out_of_time(uint64_t deadline_ns);

  std::unique_ptr<Impl> impl_;
  DwarfLimits limits_;
  DwarfRunBudget *run_ = nullptr;
  std::vector<Range> units_; // sorted by low
  // Each unit's out-of-line functions, sorted by low: read once per unit
  // (a lookup then walks one function, not its whole unit).
  std::unordered_map<uint64_t, std::vector<Range>> functions_;
  uint64_t functions_kept_ = 0;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> cache_;
  std::unordered_set<std::string> strings_;
  uint64_t spent_ns_ = 0;
  uint64_t reopens_ = 0;
  uint64_t section_bytes_ = 0;
  uint64_t inflated_bytes_ = 0;
  DwarfLoss loss_ = DwarfLoss::None;
};

// The file-name part of a source path ("src/a.c" -> "a.c").
std::string source_base_name(const std::string &path);

} // namespace offcpu
