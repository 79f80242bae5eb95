// Turns instruction pointers into frame names: kernel addresses through
// kallsyms, user addresses through the process's mappings and ELF symbols
// (with separate debug files when the binary is stripped) or its perf map.
//
// Three phases. Capture (note_user_stack), while the process is blocked on
// a stack it just announced: only what vanishes with the process is taken
// (its maps, descriptors for its files, its root, its perf map), cheaply,
// so the announcement ring keeps up with a storm of short-lived processes.
// Parsing (parse_pending), in slices between polls: ELF files and debug
// files. Naming, after tracing: expect_user_stack for every stack first
// (so perf maps are scanned once, for the addresses needed), then the
// *_frame calls.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symbolize/debuginfod.h"
#include "symbolize/dwarf_lines.h"
#include "symbolize/dwarf_loader.h"
#include "symbolize/elf_file.h"
#include "symbolize/kallsyms.h"
#include "symbolize/perf_map.h"
#include "symbolize/proc_maps.h"
#include "symbolize/python_code.h"
#include "symbolize/python_runtime.h"
#include "util/debug_file.h"
#include "util/fs.h"
#include "util/safe_file.h"

namespace offcpu {

struct CheckedFile;

// Files a user controls that were not read, by kind and cause.
enum class FileKind { Binary, DebugFile, PerfMap, Count };
const char *file_kind_name(FileKind k);
constexpr size_t kOpenFailures = static_cast<size_t>(OpenFailure::Error) + 1;

// One user frame's share of SymbolizeStats, for naming it again for free.
struct FrameCounts {
  uint32_t named = 0, unnamed = 0, gone = 0, inlined = 0;
  uint64_t *unnamed_count = nullptr; // its unnamed_by_module entry's count
};

// See Symbolizer::select_stack.
struct FrameKey {
  uint32_t tgid = 0;
  uint32_t reading = 0; // in the process's readings (UINT32_MAX: none)
  uint64_t addr = 0;
  bool is_return = false;
  bool newer = false; // a stack newer than its reading
  bool operator==(const FrameKey &o) const {
    return tgid == o.tgid && reading == o.reading && addr == o.addr &&
           is_return == o.is_return && newer == o.newer;
  }
};
struct FrameKeyHash {
  size_t operator()(const FrameKey &k) const {
    uint64_t h = k.addr * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t{k.tgid} << 32 | k.reading) + (h << 6) + (h >> 2));
    return static_cast<size_t>(h ^ (k.newer ? 0x5bd1e995u : 0u) ^
                               (k.is_return ? 0x27d4eb2du : 0u));
  }
};

struct SymbolizeStats {
  uint64_t named = 0;
  uint64_t unnamed = 0;
  std::map<std::string, uint64_t> unnamed_by_module;
  uint64_t elf_files_parsed = 0;
  // Frames left unnamed because their process had exited before its maps
  // could be read (no reading of its own, none inherited from its parent;
  // or, for a stack newer than its last reading, none that holds it).
  uint64_t frames_process_gone = 0;
  uint64_t processes_gone = 0;
  // Processes named with their parent's maps (they exited first, and had
  // not exec'd: the same image).
  uint64_t processes_inherited = 0;
  // Files refused, by kind and cause (util/safe_file.h).
  std::array<std::array<uint64_t, kOpenFailures>,
             static_cast<size_t>(FileKind::Count)>
      refused{};
  // Debug files whose size made them implausible for their binary, or
  // whose CRC took longer than allowed (per file, or the run's share).
  uint64_t debug_files_skipped = 0;
  // Debug files owned by neither root nor their binary's owner: not allowed
  // to name the binary's frames (another process may map the same file).
  uint64_t debug_files_untrusted = 0;
  // Files (binaries, debug files, vDSO images) whose symbols were read in
  // part or not at all, by the budget they went past (elf_file.h).
  std::array<uint64_t, static_cast<size_t>(SymbolLoss::Count)> symbol_losses{};
  // DWARF (inlined functions, lines): files read, frames added for
  // inlined calls, files not read or cut, by cause (dwarf_lines.h).
  uint64_t dwarf_files = 0;
  // Of those, read by the loader's thread before their frames were named.
  uint64_t dwarf_read_ahead = 0;
  // Times a file's DWARF was read again: its sections are freed past the
  // loader's budget, and at the end once its addresses are answered (peak
  // memory).
  uint64_t dwarf_reopens = 0;
  // offcpu's own executable was seen and its DWARF left unread (see
  // SourceOptions::own_dwarf).
  bool own_dwarf_skipped = false;
  uint64_t frames_inlined = 0;
  std::array<uint64_t, static_cast<size_t>(DwarfLoss::Count)> dwarf_losses{};
  // Rewritten vDSO images beyond the run's share: their frames unnamed.
  uint64_t vdso_images_skipped = 0;
  uint64_t perf_maps_truncated = 0;
  // Files (binaries, debug files) not read, or cut, because the end of the
  // run came (Symbolizer::set_deadline).
  uint64_t files_unread_at_end = 0;
  // Files a stack reached after they were let go unread (too many waited
  // open at once: symbolizer.cpp, kMaxForcedOpen).
  uint64_t files_let_go = 0;
};

// What DWARF adds to user frames (issue #31).
struct SourceOptions {
  bool dwarf =
      true; // read DWARF at all (off: --no-inline, no --lines, no pprof)
  bool inlined = true; // inlined calls as frames of their own (--no-inline)
  bool lines = false;  // "function (file.c:123)" names (--lines)
  // Each frame's source file and line read at all (--lines, pprof).
  bool files = true;
  bool python = true; // CPython processes' Python frames (--no-python)
  // DWARF of offcpu's own executable too. A whole-system run traces offcpu
  // itself; naming its few stacks from its own DWARF (39 MB in a
  // RelWithDebInfo build) mapped 13 MiB of it, a third of the run's peak
  // RSS (issue #27). Off, its frames are named by its symbol table.
  bool own_dwarf = true;
};

// The file (or kernel part) a frame's code came from; owned by Symbolizer.
struct ModuleInfo {
  std::string path; // "/usr/lib/.../libc.so.6", "[kernel.kallsyms]", "[nfs]"
  std::string build_id; // lowercase hex, may be empty
  // A separate debug file of ours (--debug-dir, /usr/lib/debug) found by
  // build id: readers that name code only from DWARF (go tool pprof) are
  // pointed there by --no-symbolize pprof. Empty if none.
  std::string debug_file;
};

class Symbolizer {
public:
  // `proc_root` is "/proc" except in tests.
  Symbolizer(const FileReader &files, KernelSymbols kernel,
             std::string proc_root = "/proc");
  ~Symbolizer();

  // Capture, while the process is blocked on this user stack: unless the
  // maps read so far cover every frame, reads them again (the process may
  // have exec'd or mapped a library since) and opens the files they name;
  // ties the stack to that reading. `parent`: the process it was forked
  // from without exec (0: unknown), whose maps stand in if it is gone.
  void note_user_stack(uint32_t tgid, uint64_t stack_id,
                       const std::vector<uint64_t> &ips, uint32_t parent = 0);
  // Processes looked at for a Python interpreter since the last call (at
  // their first noted stack): for the BPF walker's py_procs map. Each once.
  std::vector<std::pair<uint32_t, PythonProcess>> take_python_decisions() {
    return std::exchange(python_decisions_, {});
  }
  // Code objects of Python frames, read while their processes live.
  PythonNames &python() { return python_; }
  const PythonNames &python() const { return python_; }
  // Parses captured files until `deadline_ns` (CLOCK_MONOTONIC) or a stop
  // request; true when nothing is left.
  bool parse_pending(uint64_t deadline_ns);

  // Before naming: every user stack that will be named, so that each perf
  // map is scanned once for exactly the addresses needed.
  void expect_user_stack(uint32_t tgid, uint64_t stack_id,
                         const std::vector<uint64_t> &ips);

  // `addr` is the frame's address as stored; return addresses (all frames
  // but the first) are looked up one byte earlier, inside the call.
  // `module`, if given, receives where the frame's code lives (or null);
  // `counts` (here and in user_frame), what naming it added to stats().
  std::string kernel_frame(uint64_t addr, bool is_return_address,
                           const ModuleInfo **module = nullptr,
                           FrameCounts *counts = nullptr);
  // `mapping`, if given, receives the process's mapping holding the frame
  // (all zero if none).
  std::string user_frame(uint32_t tgid, uint64_t addr, bool is_return_address,
                         const ModuleInfo **module = nullptr,
                         Mapping *mapping = nullptr,
                         FrameCounts *counts = nullptr);
  // Counts a frame named before (user_frame's and user_source's `counts`)
  // once more, for another stack that holds it.
  void count_again(const FrameCounts &c);
  // A user-space lock (offcpu lock --futex): the data object in the file
  // mapped at `addr` (or in the zero-filled memory after it, .bss) as
  // "name" or "name+0x8"; else "[futex 0x... in libfoo.so]", "[futex 0x...
  // heap]"... by mapping. Named with the maps `stack_id` was taken under.
  // Needs set_data_symbols before any file is read.
  std::string user_data(uint32_t tgid, uint64_t stack_id, uint64_t addr);
  void set_data_symbols(bool on) { data_symbols_ = on; }
  // Off (--no-symbolize): frames in files are not looked up, only shown as
  // "file+0xOFFSET", for a pprof server to name by build id.
  void set_symbolize_user(bool on) { symbolize_user_ = on; }
  // What DWARF says of the user frame user_frame named (same arguments):
  // the function holding its code, then those inlined into it, innermost
  // last, with their source lines. Empty without DWARF for it. The strings
  // live as long as the Symbolizer, the chain until the next call.
  const std::vector<SourceFrame> &user_source(uint32_t tgid, uint64_t addr,
                                              bool is_return_address,
                                              FrameCounts *counts = nullptr);
  void set_source_options(SourceOptions o);
  // Debug files from debuginfod servers (DEBUGINFOD_URLS) for build ids
  // without a local one, `budget_ns` of downloads per run (0: off).
  void enable_debuginfod(uint64_t budget_ns) {
    debuginfod_ = std::make_unique<Debuginfod>(budget_ns);
  }
  const SourceOptions &source_options() const { return source_; }
  // Frames named next belong to this stack: use the maps it was taken
  // under. Returns what names its frames alike wherever they recur: its
  // process, that reading (addr and is_return to be set for each frame).
  // Two frames with one key are named alike (user_frame, user_source).
  FrameKey select_stack(uint32_t tgid, uint64_t stack_id);

  // The end of the run: files not read by `deadline_ns` (CLOCK_MONOTONIC)
  // are not read, nor the rest of one being read then; their frames show
  // as [module] (counted: `allowed_ns`, the time naming had, is what the
  // loss line reports).
  void set_deadline(uint64_t deadline_ns, uint64_t allowed_ns);
  // The planned end of the window (0: until a signal): a debug file's CRC
  // under way then is left for naming rather than hold up the end.
  void stop_window_at(uint64_t ns) { window_end_ns_ = ns; }

  void set_kernel_symbols(KernelSymbols ks) { kernel_ = std::move(ks); }
  // Roots of separate debug files (.build-id/xx/rest.debug and debuglink
  // names); default /usr/lib/debug.
  void add_debug_dirs(const std::vector<std::string> &dirs) {
    debug_dirs_.insert(debug_dirs_.begin(), dirs.begin(), dirs.end());
  }

  // The window has closed, before the counts are drained: every file's
  // DWARF taken from the loader and the addresses its stacks hold looked up
  // now, one file's sections at a time, then freed. Naming then finds them
  // cached instead of inflating a file's sections again while the profile
  // is built (libc's debug file: 8.5 MiB on top of the run's peak).
  void settle_dwarf();
  // Files whose DWARF was read so far.
  uint64_t dwarf_files_read() const { return dwarf_loader_.opened(); }

  // Naming is over (no *_frame call follows): frees what only naming
  // needed, the DWARF sections still held (the loader's, files read again
  // here), the files' and the kernel's symbols and every process's maps
  // readings, before the outputs render
  // their text (on a whole-system run under pgbench these were 38 MiB of
  // the peak at the output, issue #27). The stats stay.
  void end_naming();

  const KernelSymbols &kernel_symbols() const { return kernel_; }
  const SymbolizeStats &stats() const { return stats_; }
  // One line per cause of lost names (stderr); empty if none. DWARF read
  // in part for want of time only (a short run with large debug files: the
  // frames are whole, without their inlined calls) is a detail for -v.
  std::string describe_losses(bool verbose = true) const;

  // A process known to be alive a moment ago (announced by the kernel):
  // its maps read and its files opened now if they were not, so that its
  // frames are named even when it exits before its first stack reaches
  // user space (a short-lived process on a loaded host).
  void note_process(uint32_t tgid) { process(tgid); }

private:
  using RootRef = std::shared_ptr<const UniqueFd>;
  struct Process;
  struct FileEntry;
  using FileKey = std::tuple<uint32_t, uint32_t, uint64_t, std::string>;

  Process &process(uint32_t tgid);
  void note_native_stack(uint32_t tgid, uint64_t stack_id,
                         const std::vector<uint64_t> &ips, uint32_t parent);
  void decide_python(uint32_t tgid, Process &p);
  bool read_maps(uint32_t tgid, Process &p);
  void capture_process(uint32_t tgid, Process &p);
  void capture_files(uint32_t tgid, Process &p);
  void capture_perf_map(uint32_t tgid, Process &p);
  const std::vector<Mapping> &maps_of(uint32_t tgid);
  RootRef root_of(uint32_t tgid);

  FileEntry *file_for(const Mapping &m);
  ElfFile *elf_for(uint32_t tgid, const Mapping &m);
  void parse(FileEntry &f);
  // `found`: each address's mapping (null if none), found already.
  void warm_dwarf(const std::vector<uint64_t> &ips,
                  const std::vector<const Mapping *> &found);
  ElfFile *vdso_for(uint32_t tgid, const Mapping &m);
  void capture_vdso(uint32_t tgid, Process &p,
                    const std::vector<uint64_t> &ips);
  const std::string *kernel_vdso();
  std::unique_ptr<ElfFile> read_elf(int fd);
  void finish_warming(FileEntry &f);
  // Hands the file's DWARF to the loader, with the addresses noted so far.
  void submit_dwarf(FileEntry &f);
  DwarfFile *dwarf_for(FileEntry &f);
  std::unique_ptr<ElfFile> read_elf_image(std::string image);
  void count_loss(const ElfFile *elf);
  bool past_deadline() const;
  SymbolLimits limits_now() const;
  const ModuleInfo *module_info(const std::string &path,
                                const std::string &build_id,
                                const std::string &debug_file = "");
  struct DebugPolicies;
  void find_debug_file(FileEntry &f);
  bool debug_by_build_id(FileEntry &f, const DebugPolicies &policies);
  bool debug_by_link(FileEntry &f, const DebugPolicies &policies);
  bool debug_from_debuginfod(FileEntry &f);
  void debug_from_minidebuginfo(ElfFile &file);
  bool try_debug_file(FileEntry &f, CheckedFile c, bool crc);
  bool adopt_debug(FileEntry &f, CheckedFile debug, bool check_crc);
  const std::string *perf_map_name(Process &p, uint64_t addr);
  std::string name_user_address(uint32_t tgid, uint64_t lookup,
                                const ModuleInfo **where);
  std::string raw_user_address(uint32_t tgid, uint64_t addr, uint64_t lookup,
                               const ModuleInfo **where);
  const std::string *jit_name(Process &p, uint64_t lookup,
                              const ModuleInfo **where);
  std::optional<std::string> symbol_at(const ElfFile &elf, const Mapping &m,
                                       uint64_t lookup, bool demangled);
  std::string unnamed(const std::string &label, bool exited);
  // The unnamed_by_module entry unnamed() counted last.
  uint64_t *last_unnamed_ = nullptr;
  // note_native_stack's mappings of a stack's addresses (kept to reuse
  // its allocation: a stack is noted per process that has it).
  std::vector<const Mapping *> found_mappings_;
  // A frame of a process gone before its maps could be read: counted.
  std::string gone_frame(Process &p);
  void refuse(FileKind kind, OpenFailure why);

  const FileReader &files_;
  KernelSymbols kernel_;
  std::string proc_root_;
  std::unordered_map<uint32_t, std::unique_ptr<Process>> processes_;
  std::map<FileKey, std::unique_ptr<FileEntry>> files_by_key_;
  // file_for's answers by mapping (Process::readings: never freed before
  // end_naming(), which clears both). One entry per mapping a stack had.
  std::unordered_map<const Mapping *, FileEntry *> file_of_mapping_;
  std::deque<FileEntry *> to_parse_;
  // Files captured (open) but in no stack yet, oldest first: parsed only
  // once a stack reaches them, or when more than kMaxUnparsedOpen wait
  // (each holds a descriptor).
  std::deque<FileEntry *> unparsed_;
  size_t waiting_ = 0; // of unparsed_, those in no stack yet
  // Parsed files holding their DWARF's descriptor for a stack to reach
  // them, oldest first (entries of files submitted since are skipped).
  std::deque<FileEntry *> idle_dwarf_;
  size_t idle_dwarf_count_ = 0;
  uint64_t dwarf_files_ = 0; // submitted to the loader, this run
  // Files queued for parsing before a stack reached them (forced out of
  // unparsed_), oldest first; entries of files parsed since are skipped.
  std::deque<FileEntry *> forced_;
  size_t forced_count_ = 0;
  void force_parse(FileEntry &f);
  void parse_let_go(FileEntry &f, uint32_t tgid, const Mapping &m);
  void hold_idle_dwarf(FileEntry &f);
  void count_dwarf_let_go(FileEntry &f);
  void queue_parse(FileEntry &f);
  void queue_files_of(uint32_t tgid, const std::vector<const Mapping *> &found);
  CheckedFile open_mapped(const std::string &pid_dir, const Process &p,
                          const Mapping &m);
  // Process roots, one descriptor per distinct directory.
  std::map<std::pair<uint64_t, uint64_t>, RootRef> roots_;
  std::unordered_map<std::string, std::string> demangled_;
  // By path and build id: two files at one path (in two containers, or one
  // replaced during the run) are two modules, each with its own id.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ModuleInfo>>
      modules_;
  std::vector<std::string> debug_dirs_{"/usr/lib/debug"};
  // vDSO images by content, never by size: a process can rewrite its own
  // (through /proc/self/mem) and must not rename another's frames. The
  // kernel's own image is ours (kernel_vdso_).
  std::map<std::string, std::unique_ptr<ElfFile>> vdso_by_content_;
  std::optional<std::string> kernel_vdso_;
  bool kernel_vdso_read_ = false;
  // What every file's symbols may cost, together (elf_file.h).
  SymbolRunBudget symbol_budget_;
  // Reads DWARF off the main thread, within the run's DWARF budget.
  DwarfLoader dwarf_loader_;
  SourceOptions source_;
  bool data_symbols_ = false; // data objects read too (user_data)
  std::unique_ptr<Debuginfod> debuginfod_;
  // CRCs of debug files (util/debug_file.h).
  CrcBudget crc_budget_;
  // The end of the run's naming (0: none): files not read by then are not
  // read (set_deadline).
  uint64_t deadline_ns_ = 0;
  uint64_t name_time_ns_ = 0;
  // In parse_pending (the window), where a stop signal ends a CRC; set
  // when one did, for parse() to leave the file to naming.
  bool in_window_ = false;
  uint64_t window_end_ns_ = 0;
  bool crc_stopped_ = false;
  bool debuginfod_deferred_ = false;
  SymbolizeStats stats_;
  PythonNames python_;
  std::vector<std::pair<uint32_t, PythonProcess>> python_decisions_;
  bool symbolize_user_ = true;
};

} // namespace offcpu
