// User space of the table-driven user-stack walk (include/offcpu/unwind.h):
// reads a process's executable mappings, turns each mapped file's CFI into
// a table once (shared by every process that maps it), loads it into the
// BPF maps and installs the process's mappings. Work is queued (the walker
// asks through a ring, -p names processes up front) and done in slices
// between polls.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "collect/raw_profile.h"
#include "offcpu/shared.h"
#include "offcpu/unwind.h"
#include "probe/unwind_maps.h"
#include "symbolize/proc_maps.h"
#include "unwind/elf_cfi.h"
#include "unwind/layout_gens.h"
#include "unwind/table.h"
#include "util/debug_file.h"
#include "util/fd.h"
#include "util/fs.h"

namespace offcpu {

struct UnwindStats {
  uint64_t files_loaded = 0;
  uint64_t files_from_debug_frame = 0; // CFI only in a separate debug file
  uint64_t files_without_cfi = 0;      // walked with frame pointers
  uint64_t files_unreadable = 0;
  uint64_t files_over_cap = 0; // no room left: frame pointers, counted
  // Files given up for what they would cost (frame pointers there), by
  // which of their budgets ran out.
  uint64_t files_over_rows = 0;       // rows (unwind::CfiBudget::max_rows)
  uint64_t files_over_steps = 0;      // CFI interpreter steps
  uint64_t files_over_time = 0;       // time to build or find the table
  uint64_t files_over_pages = 0;      // rows spread over far more code
  uint64_t files_over_run_cfi = 0;    // after the run's steps were spent
  uint64_t files_over_rules = 0;      // too many new distinct rules
  uint64_t files_interrupted = 0;     // the run ended while reading them
  uint64_t rules_outside_code = 0;    // outside executable segments: dropped
  uint64_t debug_files_too_large = 0; // beyond their binary's size ratio
  // Debug files not CRC'd: the run's share of CRC time was spent.
  uint64_t debug_files_over_run_crc = 0;
  uint64_t vdso_images_over = 0; // distinct vDSO images past the cap
  uint64_t files_over_fixed = 0; // past UW_MAX_FILES files or UW_MAX_RULES
  uint64_t rows = 0, pages = 0;
  uint64_t processes = 0; // distinct processes installed
  uint64_t installs = 0;  // readings installed (re-reads after dlopen...)
  uint64_t processes_gone = 0;
  uint64_t processes_over_cap = 0; // past max_procs_: frame pointers
  uint64_t cfi_bad_entries = 0, cfi_unsupported_rows = 0;
  uint64_t parse_ns = 0; // CPU spent reading CFI and building tables
  // defer_files(): files left without a table at their process's install,
  // and of those, files built since (a walk reached them, or another
  // process needed them at its install).
  uint64_t files_deferred = 0, files_reached = 0;
};

// Whether a process's install builds the table of mapping `m` now, when
// files are deferred (Unwinder::defer_files): its program's (`program`:
// the path of its lowest file mapping), the C library's, the loader's, and
// any file a walk has reached (`asked`: addresses in the process).
bool table_at_install(const Mapping &m, const std::string &program,
                      const std::vector<uint64_t> &asked);

// How a process's executable mappings were fitted into UW_MAX_MAPPINGS
// slots (fit_mappings in unwinder.cpp).
struct MappingFit {
  uint64_t demoted = 0;       // mappings with tables walked by frame pointers
  uint64_t demoted_bytes = 0; // their code
  uint64_t spanned = 0;       // mappings without tables merged across gaps
  // Where walks go by frame pointers for want of a slot, [start, end):
  // at most UW_MAX_MAPPINGS.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

// Fits a process's executable mappings (sorted by start) into the
// UW_MAX_MAPPINGS slots the walker holds, in place; says what it cost.
MappingFit fit_mappings(std::vector<uw_mapping> &maps);

class Unwinder {
public:
  Unwinder(const FileReader &files, std::vector<std::string> debug_dirs,
           uint64_t memory_cap, std::string proc_root = "/proc");
  // A lower cap than --unwind-memory, from another budget (named in the
  // warnings when it is the one that limits), before plan().
  void limit_memory(uint64_t bytes, std::string name);
  // When the run ends (CLOCK_MONOTONIC; 0: at a signal only): a table
  // being built then is dropped, not finished, so the end is not held up.
  void stop_at(uint64_t ns) { stop_ns_ = ns; }
  ~Unwinder();
  Unwinder(const Unwinder &) = delete;
  Unwinder &operator=(const Unwinder &) = delete;

  // Sizes for tracing `pids` (empty: every process): the CFI of the files
  // they map now, with room for files mapped later, within the cap.
  UnwindSizes plan(const std::vector<uint32_t> &pids);
  // The maps to fill, once the object is loaded with plan()'s sizes.
  void attach(const UnwindMapFds &fds, const UnwindSizes &sizes);

  // Tables for this process, soon; `pc` (0: none): an address its walk
  // reached in a file left without a table (defer_files).
  void request(uint32_t tgid, uint64_t pc = 0);
  // Builds only the tables table_at_install() names at each install, the
  // others once a walk reaches their file: for runs of every process
  // (most files a host maps are on none of its off-CPU stacks). Off: -p,
  // -n and -- COMMAND, whose first waits must be whole.
  void defer_files(bool on) { defer_files_ = on; }
  // Handles requests until `deadline_ns` (CLOCK_MONOTONIC); true when none
  // is left.
  bool work(uint64_t deadline_ns);
  // work() before the waits it is for begin (the window's opening, the
  // release of -- COMMAND), for at most `budget_ns`: a file cut by the
  // budget is not given up but read again, whole, when asked later. First
  // the tables of `files`, which a process is about to map (the program of
  // -- COMMAND before its exec), published under their device and inode:
  // found through the mapping (find_vma) before that process is installed,
  // and its install needs no table built.
  bool work_ahead(uint64_t budget_ns,
                  const std::vector<std::string> &files = {});
  // True once after processes were installed: waits walked without their
  // tables can now be walked again.
  bool take_installed();
  // When the queue last became empty after work (CLOCK_MONOTONIC; 0:
  // never).
  uint64_t ready_ns() const { return ready_ns_; }

  const UnwindStats &stats() const { return stats_; }
  // Kernel memory the tables take: the arrays, plus installed processes.
  uint64_t kernel_bytes() const;
  // The warning for processes whose executable mappings did not all fit
  // (fit_mappings), with the waits and off-CPU time of the stacks that
  // passed through the ones walked by frame pointers for it; "" if none.
  std::string describe_mapping_losses(
      const CountEntries &counts,
      const std::unordered_map<uint64_t, std::vector<uint64_t>> &stacks) const;
  // -v lines: tables, memory, and how frames were recovered (the walker's
  // counters, summed over CPUs).
  std::vector<std::string>
  describe(const std::array<uint64_t, UW_STAT_NR> &walker) const;
  // One line per cause of frames not recovered; empty if none.
  std::string describe_losses(const std::array<uint64_t, UW_STAT_NR> &w) const;

private:
  struct File;
  // Null when the file is not loaded yet and `may_load` is false, or when
  // the mapping is gone since the maps were read (then *gone is set), or
  // when it is not loaded yet and larger than `max_new_file` bytes.
  File *file_for(uint32_t tgid, const Mapping &m, bool may_load = true,
                 bool *gone = nullptr, uint64_t max_new_file = UINT64_MAX);
  File *vdso_for(uint32_t tgid, const Mapping &m);
  void preload(const std::string &path);
  void load_file(File &f, int fd, const std::string &path, uint32_t tgid,
                 uint64_t size, bool trusted);
  // Files given up over a budget so far (every cause).
  uint64_t given_up() const;
  // The window has closed or a signal asked the run to end.
  bool run_ending() const;
  bool find_debug_frame(File &f, const std::string &path, uint32_t tgid,
                        const std::vector<unwind::Row> &eh_rows,
                        uint64_t binary_size, uint64_t deadline);
  // Parses within the file's and the run's budgets; false (counted by
  // cause) when one ran out.
  bool parse(const unwind::CfiSection &section, uint64_t deadline,
             std::vector<unwind::Row> &rows);
  // Rows clipped to the file's code, built and stored; false if they do
  // not fit (counted by cause).
  bool build_and_store(File &f, std::vector<unwind::Row> rows,
                       uint64_t deadline);
  bool store(File &f, const unwind::FileTable &t);
  void flush_rules();
  // Installs the process's mappings, loading the tables of files not seen
  // before while `deadline_ns` allows: a process that maps many costly
  // files is finished over several slices (nullopt: not finished, asked
  // again), so the slice ends within one file's budget of its deadline.
  // Each process requested since the last call, installed now if it maps
  // no costly file not loaded yet (see work()).
  void quick_pass(uint64_t deadline_ns);
  // `max_new_file`: files not seen before and larger than this are not
  // loaded now (nullopt), for the quick pass of work().
  std::optional<bool> install(uint32_t tgid, uint64_t deadline_ns,
                              uint64_t max_new_file = UINT64_MAX);
  // Hands the process's reading to the walker (uw_procs), as install's
  // last step; `deferred_any`: some of its files were left deferred.
  bool store_proc(uint32_t tgid, uw_proc &proc, MappingFit fit,
                  bool deferred_any);

  const FileReader &files_;
  std::vector<std::string> debug_dirs_;
  uint64_t cap_;
  std::string cap_name_ = "--unwind-memory";
  // What sized the rows and pages arrays: the cap, or the estimate from
  // the code mapped at start (then a larger cap does not help).
  bool sized_by_cap_ = false;
  uint64_t run_steps_left_;
  // Debug-file CRCs, per file and for the run (util/debug_file.h).
  CrcBudget crc_budget_;
  uint64_t stop_ns_ = 0;
  bool before_window_ = false; // in work_ahead()
  // Processes whose mappings may be installed (their kernel memory is
  // reserved out of the cap by plan()).
  uint64_t max_procs_ = 8192;
  std::string proc_root_;
  UnwindMapFds fds_;
  UnwindSizes sizes_;
  bool attached_ = false;

  unwind::RuleTable rules_;
  size_t rules_flushed_ = 0;
  uint32_t next_file_ = 0, next_page_ = 0;
  uint64_t next_row_ = 0; // in rows; files start on a chunk boundary
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::unique_ptr<File>>
      by_inode_;
  // Tables by build id, of trusted files only (root's, not writable by
  // others): another user's file with the same build id never speaks for
  // them; it gets its own table, by (device, inode).
  std::map<std::string, File *> by_build_id_;
  // vDSO tables by the whole image: a process can rewrite its own vDSO
  // (/proc/self/mem), so neither its size nor its build id names it.
  std::map<std::string, std::unique_ptr<File>> vdso_by_image_;
  std::optional<std::string> kernel_vdso_; // read at the first vDSO

  std::deque<uint32_t> queue_;
  std::set<uint32_t> queued_;
  // Walks made without tables per queued process (uw_asked), as last read,
  // its recent demand (halved at each reading, plus the walks since) and
  // when it was asked for.
  struct Demand {
    uint64_t walks = 0;
    uint64_t recent = 0;
    uint64_t asked_ns = 0;
  };
  std::unordered_map<uint32_t, Demand> demand_;
  uint64_t ordered_ns_ = 0;
  // The queue ordered by recent demand, the most walked first (see
  // order_by_demand): the processes switching now before those that asked
  // once and went quiet.
  void order_by_demand();
  // Requested since the last work(): tried once in its quick pass first.
  std::deque<uint32_t> fresh_;
  // (device, inode) already published in the file_ids map.
  std::set<std::pair<uint64_t, uint64_t>> published_;
  void publish(const Mapping &m, const File &f);
  std::unordered_map<uint32_t, uint32_t> installs_; // per process
  LayoutGens gens_; // uw_proc.gen, one per installed content
  bool defer_files_ = false;
  // Per process, the addresses its walks reached in files left without a
  // table (request()), until its next install builds them.
  std::unordered_map<uint32_t, std::vector<uint64_t>> asked_pcs_;
  // Files left without a table, by (device, inode): counted once each.
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> deferred_;
  // Processes whose last reading did not fit UW_MAX_MAPPINGS, and how.
  std::map<uint32_t, MappingFit> over_mappings_;
  // Readings redone per process since its last install (see install).
  std::unordered_map<uint32_t, uint32_t> rereads_;
  bool installed_ = false;
  uint64_t ready_ns_ = 0;
  UnwindStats stats_;
};

} // namespace offcpu
