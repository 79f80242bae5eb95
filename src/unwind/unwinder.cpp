#include "unwind/unwinder.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <tuple>

#include "unwind/demand.h"
#include "util/clock.h"
#include "util/debug_file.h"
#include "util/parse.h"
#include "util/safe_file.h"
#include "util/signals.h"

namespace offcpu {
namespace {

constexpr std::size_t kMaxMapsBytes = 64u << 20;
// Table rows per byte of executable mapping, from Debian 12's libraries
// (glibc 0.019, python3 0.024, libstdc++ 0.03), with room to spare: the
// rows array is sized from /proc/PID/maps alone, before any file is opened,
// so that sizing costs the attach nothing.
constexpr double kRowsPerCodeByte = 0.05;
// Room for what is mapped after start (dlopen, new processes).
constexpr uint64_t kSpareRowsTraced = 64u << 10;
constexpr uint64_t kSpareRowsSystem = 1u << 20;
// Per file: the time to read its CFI, check its debug file and build its
// table (checked inside the loops). Real libraries take milliseconds.
// (libLLVM's 7.7 MB .eh_frame: 155 ms of CPU, 600 ms on a loaded VM.)
constexpr uint64_t kFileBudgetNs = 1000000000;
// Per run: CFI interpreter steps over every file (a real system's files
// take a few million; each step reads at least one byte).
constexpr uint64_t kRunSteps = uint64_t{256} << 20;
// The most one file's mappings count in the estimate that sizes the rows
// array (the largest real binaries have ~200 MiB of code): a 1 TiB sparse
// file mapped executable does not size the arrays.
constexpr uint64_t kMaxCodePerFile = uint64_t{256} << 20;
// Page descriptors per row in the arrays' sizes: real code has 30-80 rows
// per page; hostile files are held to unwind::page_allowance().
constexpr uint64_t kRowsPerPageSlot = 16;
constexpr uint64_t kSparePages = 8192;
// New distinct rules one file may add to the run's table (UW_MAX_RULES in
// all; a whole system has a few thousand): a file of 65,536 different CFA
// offsets cannot fill it for everyone else.
constexpr size_t kMaxNewRulesPerFile = 4096;
// uw_procs' max_entries (bpf/user_unwind.bpf.h).
constexpr uint64_t kMaxProcs = 8192;
// Readings of one process redone because a mapping went away while it
// was read (an exec in progress): then the mapping is skipped.
constexpr uint32_t kMaxRereads = 8;
// work()'s quick pass loads only files not seen before of at most this
// size (a shell's, an assembler's: milliseconds), so that a process whose
// big files are built already (a new cc1plus) or whose own are small is
// installed before the next costly file, not after every one queued.
constexpr uint64_t kQuickFileBytes = 2u << 20;
// Distinct vDSO images kept (one per kernel, really; more are processes
// that rewrote their own).
constexpr size_t kMaxVdsoImages = 8;

std::string pid_dir(const std::string &root, uint32_t tgid) {
  return root + "/" + std::to_string(tgid);
}

std::string dirname_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Every process now, for a whole-system estimate.
std::vector<uint32_t> all_processes(const std::string &proc_root) {
  std::vector<uint32_t> out;
  if (DIR *d = opendir(proc_root.c_str())) {
    while (dirent *e = readdir(d)) {
      char *end = nullptr;
      unsigned long v = strtoul(e->d_name, &end, 10);
      if (end && *end == '\0' && v > 0 && v < UINT32_MAX)
        out.push_back(static_cast<uint32_t>(v));
    }
    closedir(d);
  }
  return out;
}

// mm->map_count as the maps text shows it: one line per VMA, but for the
// [vsyscall] page, which is no VMA.
uint64_t vma_count(const std::string &text) {
  uint64_t lines =
      static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n')
    lines++;
  if (text.find("[vsyscall]") != std::string::npos && lines > 0)
    lines--;
  return lines;
}

// mm->start_stack from /proc/PID/stat (its 28th field; the name in
// parentheses before may hold spaces): where each exec put the stack. 0 if
// unknown: the key then differs from the walker's, which asks again.
uint64_t start_stack(const FileReader &files, const std::string &dir) {
  auto stat = files.read(dir + "/stat", 4096);
  if (!stat)
    return 0;
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos)
    return 0;
  std::string_view rest(*stat);
  rest.remove_prefix(paren + 1);
  std::string_view field;
  for (int i = 3; i <= 28; i++) // the state is the 3rd field
    field = next_field(rest);
  uint64_t v = 0;
  for (char c : field) {
    if (c < '0' || c > '9')
      return 0;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

CheckedFile open_mapped(const std::string &proc_root, uint32_t tgid,
                        const Mapping &m) {
  char range[64];
  snprintf(range, sizeof(range), "/map_files/%" PRIx64 "-%" PRIx64, m.start,
           m.end);
  FilePolicy mapped;
  mapped.follow_last_symlink = true;
  mapped.max_size = UINT64_MAX; // only the CFI sections are read
  return open_checked(pid_dir(proc_root, tgid) + range, mapped);
}

// The effective user of a process, whose files it may read.
std::optional<Credentials> creds_of(const FileReader &files,
                                    const std::string &dir) {
  auto status = files.read(dir + "/status", 1u << 16);
  if (!status)
    return std::nullopt;
  auto field = [&](const char *name) -> std::optional<uint32_t> {
    size_t at = status->find(std::string("\n") + name + ":");
    if (at == std::string::npos)
      return std::nullopt;
    std::string_view rest(*status);
    rest.remove_prefix(at + strlen(name) + 2);
    next_field(rest); // real
    std::string_view eff = next_field(rest);
    if (eff.empty() || eff.size() > 10)
      return std::nullopt;
    return static_cast<uint32_t>(std::stoul(std::string(eff)));
  };
  auto uid = field("Uid"), gid = field("Gid");
  if (!uid || !gid)
    return std::nullopt;
  return Credentials{*uid, *gid};
}

// The kernel's vDSO image, as mapped in offcpu itself: every process of
// this kernel maps the same bytes unless it rewrote its own (empty if not
// found).
std::string kernel_vdso(const FileReader &files) {
  const unsigned long base = getauxval(AT_SYSINFO_EHDR);
  auto text = files.read("/proc/self/maps", kMaxMapsBytes);
  if (!base || !text)
    return {};
  for (const Mapping &m : parse_proc_maps(*text))
    if (m.path == "[vdso]" && m.start == base && m.end - m.start <= (1u << 20))
      return std::string(reinterpret_cast<const char *>(base), m.end - m.start);
  return {};
}

// uw_mapping.pad, between install and fit_mappings only: a file's mapping
// whose table was not looked for, for want of slots.
constexpr uint32_t kLeftOut = 1;

std::string mib(uint64_t bytes) {
  char s[32];
  snprintf(s, sizeof(s), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

} // namespace

// A process's executable mappings as the walker will hold them (at most
// UW_MAX_MAPPINGS, sorted by address). Neighbours the walk cannot tell apart
// are merged first: one file's contiguous segments, and adjacent mappings
// without a table. If that is not enough (hundreds of plugins, JIT regions
// or copies of one file), the smallest mappings with tables lose them, and
// each run of mappings without tables becomes one span, the gaps inside it
// taken for code: a walk through them goes on by frame pointers rather than
// stopping at an address no slot holds (libc, left without one, once cost a
// process 96% of its stacks). The largest code keeps its tables, and so does
// the lowest mapping with one: the program's, unless it placed a file below
// itself (the loader maps libraries, and mmap files, top-down). A mapping
// marked kLeftOut (its file not read: no slot would have been left for it)
// counts as one that lost its table.
MappingFit fit_mappings(std::vector<uw_mapping> &maps) {
  MappingFit fit;
  auto size = [](const uw_mapping &m) { return m.end - m.start; };
  std::vector<uw_mapping> out;
  for (const uw_mapping &m : maps) {
    if (m.pad & kLeftOut) {
      fit.demoted++;
      fit.demoted_bytes += size(m);
    }
    if (!out.empty()) {
      uw_mapping &b = out.back();
      if (b.end == m.start && b.file == m.file &&
          (m.file == UW_FILE_NONE || b.base == m.base)) {
        b.end = m.end;
        b.pad |= m.pad;
        continue;
      }
    }
    out.push_back(m);
  }
  maps.swap(out);
  const size_t n = maps.size();
  std::vector<bool> none(n), demoted(n);
  size_t runs = 0;
  for (size_t i = 0; i < n; i++) {
    none[i] = maps[i].file == UW_FILE_NONE;
    demoted[i] = maps[i].pad & kLeftOut;
    if (!none[i] || i == 0 || !none[i - 1])
      runs++;
  }
  if (n > UW_MAX_MAPPINGS) {
    // The lowest with a table is the program's (see above): kept.
    std::vector<size_t> order;
    bool program_seen = false;
    for (size_t i = 0; i < n; i++) {
      if (none[i])
        continue;
      if (program_seen)
        order.push_back(i);
      program_seen = true;
    }
    // Smallest first; of equal ones, the later first.
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      uint64_t sa = size(maps[a]), sb = size(maps[b]);
      return sa != sb ? sa < sb : a > b;
    });
    for (size_t k = 0; runs > UW_MAX_MAPPINGS && k < order.size(); k++) {
      size_t i = order[k];
      bool left = i > 0 && none[i - 1], right = i + 1 < n && none[i + 1];
      none[i] = demoted[i] = true;
      runs -= (left ? 1 : 0) + (right ? 1 : 0);
      fit.demoted++;
      fit.demoted_bytes += size(maps[i]);
    }
  }
  // Where walks go by frame pointers for want of a slot: mappings that
  // lost their tables, and spans over gaps (for the cost in the report).
  out.clear();
  std::vector<bool> out_fitted;
  for (size_t i = 0; i < n; i++) {
    if (n > UW_MAX_MAPPINGS && none[i] && i > 0 && none[i - 1]) {
      out.back().end = maps[i].end;
      out_fitted.back() = true;
      fit.spanned++;
      continue;
    }
    uw_mapping e = maps[i];
    if (none[i]) {
      e.file = UW_FILE_NONE;
      e.base = 0;
    }
    e.pad = 0;
    out.push_back(e);
    out_fitted.push_back(demoted[i]);
  }
  for (size_t i = 0; i < out.size(); i++)
    if (out_fitted[i])
      fit.ranges.emplace_back(out[i].start, out[i].end);
  maps.swap(out);
  return fit;
}

struct Unwinder::File {
  uint32_t id = UW_FILE_NONE;
  uint64_t table_base = 0;
  std::string build_id;
  unwind::ElfCfi cfi_headers; // for vaddr_of_offset

  std::optional<uint64_t> base_for(const Mapping &m) const {
    auto vaddr = cfi_headers.vaddr_of_offset(m.offset);
    if (!vaddr)
      return std::nullopt;
    return m.start - *vaddr + table_base;
  }
};

// The file's executable segments as file-address ranges: where its rows
// may apply.
std::vector<std::pair<uint64_t, uint64_t>>
exec_ranges(const std::vector<unwind::ElfCfi::Segment> &loads) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto &s : loads)
    if (s.exec && s.filesz > 0 && s.vaddr + s.filesz > s.vaddr)
      out.emplace_back(s.vaddr, s.vaddr + s.filesz);
  return out;
}

Unwinder::Unwinder(const FileReader &files, std::vector<std::string> debug_dirs,
                   uint64_t memory_cap, std::string proc_root)
    : files_(files), debug_dirs_(std::move(debug_dirs)), cap_(memory_cap),
      run_steps_left_(kRunSteps), proc_root_(std::move(proc_root)) {
  debug_dirs_.push_back("/usr/lib/debug");
}

void Unwinder::limit_memory(uint64_t bytes, std::string name) {
  if (bytes <= cap_) {
    cap_ = bytes;
    cap_name_ = std::move(name);
  }
}

Unwinder::~Unwinder() = default;

UnwindSizes Unwinder::plan(const std::vector<uint32_t> &pids) {
  const bool system = pids.empty();
  uint64_t code_bytes = 0;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, uint64_t> per_file;
  const std::vector<uint32_t> procs = system ? all_processes(proc_root_) : pids;
  // Installed processes (8 KiB each, allocated as they come) count against
  // the cap too: room for twice the processes there are now, and at least
  // 1024 (a traced command's children).
  max_procs_ = std::min<uint64_t>(
      kMaxProcs, std::max<uint64_t>(2 * procs.size() + 256, 1024));
  const uint64_t procs_bytes = max_procs_ * sizeof(uw_proc);
  const uint64_t arrays_cap = cap_ > procs_bytes ? cap_ - procs_bytes : 0;
  for (uint32_t tgid : procs) {
    auto text = files_.read(pid_dir(proc_root_, tgid) + "/maps", kMaxMapsBytes);
    if (!text)
      continue;
    for (const Mapping &m : parse_proc_maps(*text))
      if (m.executable && m.is_file()) {
        uint64_t &n = per_file[{m.dev_major, m.dev_minor, m.inode}];
        n = std::min(kMaxCodePerFile, n + (m.end - m.start));
      }
  }
  for (const auto &f : per_file)
    code_bytes += f.second;
  uint64_t rows = static_cast<uint64_t>(static_cast<double>(code_bytes) *
                                        kRowsPerCodeByte) +
                  (system ? kSpareRowsSystem : kSpareRowsTraced);
  if (system)
    rows += rows / 2;
  UnwindSizes s;
  s.files = UW_MAX_FILES;
  s.rules = UW_MAX_RULES;
  // Rows and page descriptors grow together: both from the rows, never
  // from the span of the code (a sparse 1 TiB mapping has no rows).
  auto fit = [&](uint64_t r) {
    s.row_chunks = static_cast<uint32_t>(
        std::min<uint64_t>(r / UW_ROWS_PER_CHUNK + 1, UINT32_MAX / 32));
    s.pages = static_cast<uint32_t>(
        std::min<uint64_t>(r / kRowsPerPageSlot + kSparePages, UINT32_MAX / 2));
  };
  fit(rows);
  sized_by_cap_ = s.bytes() > arrays_cap;
  if (sized_by_cap_) {
    fit(0);
    const uint64_t fixed = s.bytes();
    const uint64_t per_row = sizeof(uint32_t) + 8 / kRowsPerPageSlot;
    fit(arrays_cap > fixed ? (arrays_cap - fixed) / per_row : 0);
  }
  return s;
}

void Unwinder::attach(const UnwindMapFds &fds, const UnwindSizes &sizes) {
  fds_ = fds;
  sizes_ = sizes;
  attached_ = fds.procs >= 0;
}

namespace {

// The walker holds UW_MAX_MAPPINGS: past that, files are read only for as
// many as fit_mappings could keep (the lowest file mapping, the program's,
// and the largest), not for the 65,000 a process may map.
std::vector<bool> mappings_to_read(const std::vector<Mapping> &exec) {
  std::vector<bool> wanted(exec.size(), true);
  if (exec.size() <= UW_MAX_MAPPINGS)
    return wanted;
  std::vector<size_t> order;
  for (size_t i = 0; i < exec.size(); i++)
    if (exec[i].is_file() || exec[i].path == "[vdso]")
      order.push_back(i);
  auto size = [&](size_t i) { return exec[i].end - exec[i].start; };
  if (!order.empty())
    std::stable_sort(order.begin() + 1, order.end(),
                     [&](size_t a, size_t b) { return size(a) > size(b); });
  wanted.assign(exec.size(), false);
  for (size_t k = 0; k < order.size() && k < UW_MAX_MAPPINGS; k++)
    wanted[order[k]] = true;
  return wanted;
}

// The program's path: its lowest file mapping (see fit_mappings).
std::string program_of(const std::vector<Mapping> &exec) {
  for (const Mapping &m : exec)
    if (m.is_file())
      return m.path;
  return "";
}

} // namespace

bool table_at_install(const Mapping &m, const std::string &program,
                      const std::vector<uint64_t> &asked) {
  for (uint64_t pc : asked)
    if (pc >= m.start && pc < m.end)
      return true;
  if (m.path == program)
    return true;
  // Every blocking system call goes through the C library (and, on older
  // glibc, libpthread's waits); the loader holds the outermost frame.
  const std::string name = m.display_name();
  for (std::string_view runtime :
       {"libc.so", "libc-", "ld-linux", "ld-musl", "ld-2.", "libpthread"})
    if (std::string_view(name).substr(0, runtime.size()) == runtime)
      return true;
  return false;
}

// Addresses kept per process between installs: past it, later ones wait
// for the next install (the walks that asked are taken again then).
constexpr size_t kMaxAskedPcs = 64;

void Unwinder::request(uint32_t tgid, uint64_t pc) {
  if (pc) {
    std::vector<uint64_t> &pcs = asked_pcs_[tgid];
    if (pcs.size() < kMaxAskedPcs)
      pcs.push_back(pc);
  }
  if (queued_.insert(tgid).second) {
    queue_.push_back(tgid);
    fresh_.push_back(tgid);
    demand_[tgid].asked_ns = monotonic_ns();
  }
}

// The queue's order by demand is read again after this long.
constexpr uint64_t kOrderGapNs = 20'000'000;

// Measured on a host compiling (issue 27): requests queued behind a few
// processes with costly files (5 MB of .eh_frame each) waited seconds, and
// every wait of theirs meanwhile was walked with frame pointers (52% of
// all walks under pgbench; 1,000 threads of a small program were never
// installed in 8 s). Each new request is tried once without costly files.
void Unwinder::quick_pass(uint64_t deadline_ns) {
  while (!fresh_.empty() && monotonic_ns() < deadline_ns && !stop_requested()) {
    const uint32_t tgid = fresh_.front();
    fresh_.pop_front();
    if (!queued_.count(tgid))
      continue;
    auto done = install(tgid, deadline_ns, kQuickFileBytes);
    if (!done)
      continue; // a costly file: in its turn in the queue
    if (*done)
      installed_ = true;
    queued_.erase(tgid);
    demand_.erase(tgid);
    queue_.erase(std::find(queue_.begin(), queue_.end(), tgid));
    if (queue_.empty())
      ready_ns_ = monotonic_ns();
  }
}

bool Unwinder::take_installed() {
  bool was = installed_;
  installed_ = false;
  return was;
}

// Served in the order asked, under pgbench on a loaded host (issue #27),
// processes running from the start still had no tables 22 s in (142,463
// of 185,615 walks made without them): the queue was busy with requests
// of processes that had walked once. Now by recent demand, weighed by how
// long the process has waited with it: one that has been walking for
// seconds will likely go on (a server), while a burst just asked may end
// before its tables are built (a compiler). Read at most every
// kOrderGapNs, in a bounded number of system calls (read_demand).
void Unwinder::order_by_demand() {
  if (fds_.asked < 0 || queue_.size() < 2)
    return;
  const uint64_t now = monotonic_ns();
  if (now - ordered_ns_ < kOrderGapNs)
    return;
  ordered_ns_ = now;
  const DemandReading read = read_demand(fds_.asked, queue_);
  std::unordered_map<uint32_t, double> score;
  for (uint32_t tgid : queue_) {
    Demand &mine = demand_[tgid];
    mine.recent /= 2;
    auto it = read.walks.find(tgid);
    if (it != read.walks.end()) {
      if (it->second >= mine.walks)
        mine.recent += it->second - mine.walks;
      mine.walks = it->second;
    }
    const uint64_t waited = now > mine.asked_ns ? now - mine.asked_ns : 0;
    score[tgid] = static_cast<double>(mine.recent) *
                  static_cast<double>(waited + kOrderGapNs);
  }
  std::stable_sort(queue_.begin(), queue_.end(),
                   [&](uint32_t a, uint32_t b) { return score[a] > score[b]; });
}

bool Unwinder::work(uint64_t deadline_ns) {
  if (attached_)
    quick_pass(deadline_ns);
  order_by_demand();
  while (!queue_.empty()) {
    // A stop ends the slice too: the run must end within a second of it.
    if (monotonic_ns() >= deadline_ns || stop_requested())
      return false;
    uint32_t tgid = queue_.front();
    if (attached_) {
      auto done = install(tgid, deadline_ns);
      if (!done) {
        // The rest of its files later, after the others waiting: a
        // process with many costly files does not hold up everyone's.
        queue_.pop_front();
        queue_.push_back(tgid);
        return false;
      }
      if (*done)
        installed_ = true;
    }
    queue_.pop_front();
    queued_.erase(tgid);
    demand_.erase(tgid);
    if (queue_.empty())
      ready_ns_ = monotonic_ns();
  }
  return true;
}

bool Unwinder::work_ahead(uint64_t budget_ns,
                          const std::vector<std::string> &files) {
  const uint64_t stop = stop_ns_;
  const uint64_t deadline = monotonic_ns() + budget_ns;
  stop_ns_ = deadline; // cuts a costly file's reading at the budget
  before_window_ = true;
  for (const std::string &path : files)
    if (monotonic_ns() < deadline && !stop_requested())
      preload(path);
  const bool done = work(deadline);
  before_window_ = false;
  stop_ns_ = stop;
  return done;
}

void Unwinder::preload(const std::string &path) {
  FilePolicy policy;
  policy.follow_last_symlink = true;
  policy.max_size = UINT64_MAX; // only the CFI sections are read
  CheckedFile opened = open_checked(path, policy);
  if (!opened)
    return; // read from the process's mappings once it runs, if at all
  Mapping m;
  m.dev_major = major(opened.st.st_dev);
  m.dev_minor = minor(opened.st.st_dev);
  m.inode = opened.st.st_ino;
  m.path = path;
  auto key = std::make_tuple(m.dev_major, m.dev_minor, m.inode);
  if (by_inode_.count(key))
    return;
  auto &slot = by_inode_[key];
  slot = std::make_unique<File>();
  const bool trusted =
      opened.st.st_uid == 0 && (opened.st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  const uint64_t interrupted = stats_.files_interrupted;
  load_file(*slot, opened.fd.get(), path, static_cast<uint32_t>(getpid()),
            static_cast<uint64_t>(opened.st.st_size), trusted);
  if (stats_.files_interrupted != interrupted) {
    // Cut by the start-up's budget: read whole from the mappings later.
    stats_.files_interrupted = interrupted;
    by_inode_.erase(key);
    return;
  }
  if (slot->id != UW_FILE_NONE)
    publish(m, *slot);
}

std::optional<bool> Unwinder::install(uint32_t tgid, uint64_t deadline_ns,
                                      uint64_t max_new_file) {
  const std::string dir = pid_dir(proc_root_, tgid);
  auto text = files_.read(dir + "/maps", kMaxMapsBytes);
  if (!text || text->empty()) {
    stats_.processes_gone++;
    rereads_.erase(tgid);
    asked_pcs_.erase(tgid);
    return false;
  }
  auto proc = std::make_unique<uw_proc>();
  std::memset(proc.get(), 0, sizeof(*proc));
  // As the walker keys a process's mappings (uw_map_key): an exec of the
  // same program, as many mappings elsewhere, is not this reading.
  proc->map_count = vma_count(*text) ^ (start_stack(files_, dir) << 16);
  std::vector<Mapping> exec;
  for (Mapping &m : parse_proc_maps(*text))
    if (m.executable)
      exec.push_back(std::move(m));
  const std::vector<bool> wanted = mappings_to_read(exec);
  const std::string program = program_of(exec);
  static const std::vector<uint64_t> kNoneAsked;
  auto asked_it = asked_pcs_.find(tgid);
  const std::vector<uint64_t> &asked =
      asked_it != asked_pcs_.end() ? asked_it->second : kNoneAsked;
  bool deferred_any = false;
  std::vector<uw_mapping> maps;
  for (size_t i = 0; i < exec.size(); i++) {
    const Mapping &m = exec[i];
    uw_mapping &out = maps.emplace_back();
    out.start = m.start;
    out.end = m.end;
    out.file = UW_FILE_NONE; // anonymous (JIT) or no table: frame pointers
    File *f = nullptr;
    const auto key = std::make_tuple(m.dev_major, m.dev_minor, m.inode);
    if (!wanted[i])
      out.pad = kLeftOut;
    else if (m.path == "[vdso]")
      f = vdso_for(tgid, m);
    else if (m.is_file() && defer_files_ &&
             !table_at_install(m, program, asked) &&
             !(f = file_for(tgid, m, false))) {
      // Built when a walk first reaches it (another process's install may
      // have built it already: then used as it is).
      out.file = UW_FILE_DEFERRED;
      deferred_any = true;
      if (deferred_.insert(key).second)
        stats_.files_deferred++;
      continue;
    } else if (m.is_file() && !f) {
      bool gone = false;
      f = file_for(tgid, m, monotonic_ns() < deadline_ns, &gone, max_new_file);
      // Not loaded yet, or its mapping changed under the reading: the
      // process is read again later (a few times at most for a mapping
      // gone, then that mapping goes without a table in this reading).
      if (!f && (!gone || ++rereads_[tgid] <= kMaxRereads))
        return std::nullopt;
      if (f && deferred_.erase(key))
        stats_.files_reached++;
    }
    if (f && f->id != UW_FILE_NONE)
      if (auto base = f->base_for(m)) {
        out.file = f->id;
        out.base = *base;
        if (m.is_file())
          publish(m, *f);
      }
  }
  MappingFit fit = fit_mappings(maps);
  proc->nr = static_cast<uint32_t>(maps.size());
  std::copy(maps.begin(), maps.end(), proc->maps);
  rereads_.erase(tgid);
  return store_proc(tgid, *proc, std::move(fit), deferred_any);
}

bool Unwinder::store_proc(uint32_t tgid, uw_proc &proc, MappingFit fit,
                          bool deferred_any) {
  const bool known = installs_.count(tgid) != 0;
  std::optional<uint32_t> gen;
  if (known || stats_.processes < max_procs_)
    gen = gens_.gen_for(proc.maps, std::min<size_t>(proc.nr, UW_MAX_MAPPINGS));
  if (!gen) {
    stats_.processes_over_cap++;
    asked_pcs_.erase(tgid);
    return false;
  }
  if (installs_[tgid]++ == 0)
    stats_.processes++;
  proc.gen = *gen;
  // The walker asks once per address space (uw_asked): forgotten first, so
  // that its first walk into a file left deferred here asks for it.
  if (deferred_any && fds_.asked >= 0)
    bpf_map_delete_elem(fds_.asked, &tgid);
  asked_pcs_.erase(tgid); // asked again by a walk if not met
  if (bpf_map_update_elem(fds_.procs, &tgid, &proc, BPF_ANY) != 0)
    return false;
  if (fit.demoted || fit.spanned)
    over_mappings_[tgid] = std::move(fit); // as its latest reading has it
  else
    over_mappings_.erase(tgid);
  if (fds_.epoch)
    __atomic_fetch_add(fds_.epoch, 1, __ATOMIC_SEQ_CST);
  stats_.installs++;
  return true;
}

// The file's table by its identity, for the walks of processes that map it
// before they are installed themselves (a fresh exec): the kernel gives
// the walk each address's mapping, this gives the table. The device is
// numbered as the kernel's s_dev (major << 20 | minor).
void Unwinder::publish(const Mapping &m, const File &f) {
  if (fds_.file_ids < 0)
    return;
  uw_file_key key{(uint64_t{m.dev_major} << 20) | m.dev_minor, m.inode};
  if (!published_.insert({key.dev, key.ino}).second)
    return;
  uw_file_id id{};
  id.file = f.id;
  id.table_base = f.table_base;
  for (const auto &s : f.cfi_headers.loads) {
    if (!s.exec || id.nsegs >= UW_FILE_SEGS)
      continue;
    // As vaddr_of_offset: mappings start at the segment's page.
    id.seg[id.nsegs++] = {s.offset & ~uint64_t{0xfff}, s.offset + s.filesz,
                          static_cast<__s64>(s.vaddr - s.offset)};
  }
  if (id.nsegs == 0 ||
      bpf_map_update_elem(fds_.file_ids, &key, &id, BPF_ANY) != 0)
    published_.erase({key.dev, key.ino}); // tried again at the next install
}

Unwinder::File *Unwinder::vdso_for(uint32_t tgid, const Mapping &m) {
  uint64_t size = m.end - m.start;
  if (size == 0 || size > (1u << 20))
    return nullptr;
  auto image =
      files_.read_at(pid_dir(proc_root_, tgid) + "/mem", m.start, size);
  if (!image)
    return nullptr;
  auto it = vdso_by_image_.find(*image);
  if (it != vdso_by_image_.end())
    return it->second.get();
  // The kernel's own image always has its table; rewritten ones share a
  // few slots.
  if (!kernel_vdso_)
    kernel_vdso_ = kernel_vdso(files_);
  if (vdso_by_image_.size() >= kMaxVdsoImages && *image != *kernel_vdso_) {
    stats_.vdso_images_over++;
    return nullptr;
  }
  File *f = vdso_by_image_.emplace(*image, std::make_unique<File>())
                .first->second.get();
  const uint64_t t0 = monotonic_ns();
  auto cfi = unwind::read_elf_cfi_memory(*image);
  if (cfi && !cfi->eh_frame.empty()) {
    f->cfi_headers.loads = cfi->loads;
    f->build_id = cfi->build_id;
    std::vector<unwind::Row> rows;
    if (parse({cfi->eh_frame, cfi->eh_frame_vaddr, true}, t0 + kFileBudgetNs,
              rows))
      build_and_store(*f, std::move(rows), t0 + kFileBudgetNs);
  }
  stats_.parse_ns += monotonic_ns() - t0;
  return f;
}

Unwinder::File *Unwinder::file_for(uint32_t tgid, const Mapping &m,
                                   bool may_load, bool *gone,
                                   uint64_t max_new_file) {
  auto key = std::make_tuple(m.dev_major, m.dev_minor, m.inode);
  auto found = by_inode_.find(key);
  if (found != by_inode_.end())
    return found->second.get();
  if (!may_load)
    return nullptr;
  CheckedFile opened = open_mapped(proc_root_, tgid, m);
  if (!opened && opened.failure == OpenFailure::Missing) {
    // The mapping went away after the maps were read (an exec, an unmap):
    // the file may be fine, so nothing is kept for it. Kept as unreadable,
    // a library mapped by the command offcpu starts (read during its exec)
    // had no table for the whole run.
    if (gone)
      *gone = true;
    return nullptr;
  }
  if (opened && static_cast<uint64_t>(opened.st.st_size) > max_new_file)
    return nullptr; // loaded in the process's turn (see quick_pass)
  auto &slot = by_inode_[key];
  slot = std::make_unique<File>();
  if (!opened) {
    stats_.files_unreadable++;
    return slot.get();
  }
  // Root's own file, which only root can change, may speak for every copy
  // with its build id; anyone else's only for itself.
  const bool trusted =
      opened.st.st_uid == 0 && (opened.st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  const uint64_t interrupted = stats_.files_interrupted;
  load_file(*slot, opened.fd.get(), m.real_path(), tgid,
            static_cast<uint64_t>(opened.st.st_size), trusted);
  if (before_window_ && stats_.files_interrupted != interrupted &&
      !stop_requested()) {
    // Cut by the start-up's budget, not by the run's end: read again, as
    // if never tried, once the window is open.
    stats_.files_interrupted = interrupted;
    by_inode_.erase(key);
    return nullptr;
  }
  return slot.get();
}

bool Unwinder::run_ending() const {
  return (stop_ns_ && monotonic_ns() >= stop_ns_) || stop_requested();
}

uint64_t Unwinder::given_up() const {
  const UnwindStats &s = stats_;
  return s.files_over_rows + s.files_over_steps + s.files_over_time +
         s.files_over_pages + s.files_over_run_cfi + s.files_over_rules;
}

bool Unwinder::parse(const unwind::CfiSection &section, uint64_t deadline,
                     std::vector<unwind::Row> &rows) {
  unwind::CfiBudget budget;
  budget.deadline_ns = deadline;
  budget.stop_ns = stop_ns_;
  budget.stop_requested = &stop_requested;
  const bool run_limits = run_steps_left_ < budget.max_steps;
  budget.max_steps = std::min(budget.max_steps, run_steps_left_);
  unwind::CfiStats st;
  rows = unwind::parse_cfi(section, &st, budget);
  run_steps_left_ -= std::min(run_steps_left_, st.steps);
  stats_.cfi_bad_entries += st.bad_entries;
  stats_.cfi_unsupported_rows += st.unsupported_rows;
  switch (st.over) {
  case unwind::OverBudget::None:
    return true;
  case unwind::OverBudget::Rows:
    stats_.files_over_rows++;
    break;
  case unwind::OverBudget::Steps:
    (run_limits ? stats_.files_over_run_cfi : stats_.files_over_steps)++;
    break;
  case unwind::OverBudget::Time:
    stats_.files_over_time++;
    break;
  case unwind::OverBudget::Interrupted:
    stats_.files_interrupted++;
    break;
  }
  rows.clear();
  return false;
}

bool Unwinder::build_and_store(File &f, std::vector<unwind::Row> rows,
                               uint64_t deadline) {
  uint64_t dropped = 0;
  rows = unwind::clip_rows(std::move(rows), exec_ranges(f.cfi_headers.loads),
                           &dropped);
  stats_.rules_outside_code += dropped;
  if (rows.empty())
    return false;
  if (unwind::table_pages(rows) > unwind::page_allowance(rows.size())) {
    stats_.files_over_pages++;
    return false;
  }
  if (monotonic_ns() >= deadline) {
    stats_.files_over_time++;
    return false;
  }
  const size_t rules_before = rules_.rules().size();
  unwind::FileTable t = unwind::build_table(rows, rules_);
  if (rules_.rules().size() - rules_before > kMaxNewRulesPerFile) {
    rules_.truncate(rules_before); // not loaded yet: nobody uses them
    stats_.files_over_rules++;
    return false;
  }
  return store(f, t);
}

void Unwinder::load_file(File &f, int fd, const std::string &path,
                         uint32_t tgid, uint64_t size, bool trusted) {
  const uint64_t t0 = monotonic_ns();
  const uint64_t deadline = t0 + kFileBudgetNs;
  auto headers = unwind::read_elf_cfi(fd, unwind::CfiWant::Headers);
  if (!headers) {
    stats_.files_unreadable++;
    return;
  }
  // The same file reached another way (another mount, a copy): one table,
  // the trusted file's.
  if (!headers->build_id.empty()) {
    auto it = by_build_id_.find(headers->build_id);
    if (it != by_build_id_.end()) {
      f = *it->second;
      f.cfi_headers.loads = headers->loads;
      return;
    }
  }
  f.cfi_headers.loads = headers->loads;
  f.build_id = headers->build_id;
  std::vector<unwind::Row> rows;
  if (headers->eh_frame_size > 0) {
    auto cfi = unwind::read_elf_cfi(fd, unwind::CfiWant::EhFrame);
    if (cfi && !cfi->eh_frame.empty() &&
        !parse({cfi->eh_frame, cfi->eh_frame_vaddr, true}, deadline, rows)) {
      stats_.parse_ns += monotonic_ns() - t0;
      return; // over a budget: counted, frame pointers
    }
  }
  stats_.parse_ns += monotonic_ns() - t0;
  // Code with little or no .eh_frame (built without asynchronous unwind
  // tables) may have .debug_frame in its debug file.
  if (unwind::covered_bytes(rows) < headers->code_bytes() / 2) {
    f.cfi_headers.debuglink = headers->debuglink;
    f.cfi_headers.debuglink_crc = headers->debuglink_crc;
    const uint64_t before = given_up() + stats_.files_interrupted;
    if (find_debug_frame(f, path, tgid, rows, size, deadline))
      return;
    if (given_up() + stats_.files_interrupted != before)
      return; // counted where it stopped
    if (run_ending()) {
      stats_.files_interrupted++;
      return;
    }
    if (monotonic_ns() >= deadline) {
      stats_.files_over_time++;
      return;
    }
  }
  if (rows.empty()) {
    stats_.files_without_cfi++;
    return;
  }
  const uint64_t t1 = monotonic_ns();
  build_and_store(f, std::move(rows), deadline);
  stats_.parse_ns += monotonic_ns() - t1;
  if (trusted && !f.build_id.empty() && f.id != UW_FILE_NONE)
    by_build_id_[f.build_id] = &f;
}

// Code built without .eh_frame (-fno-asynchronous-unwind-tables) keeps its
// CFI in .debug_frame, which stripping moves to the debug file: by build
// id under the debug directories, or by .gnu_debuglink beside the file.
bool Unwinder::find_debug_frame(File &f, const std::string &path, uint32_t tgid,
                                const std::vector<unwind::Row> &eh_rows,
                                uint64_t binary_size, uint64_t deadline) {
  FilePolicy ours;
  ours.follow_last_symlink = true;
  // Debug files as the symbolizer allows them (util/debug_file.h): a link
  // to a 4 GiB sparse file is not read.
  ours.max_size = max_debug_file_bytes(binary_size);
  auto try_file = [&](CheckedFile c, bool check_crc) {
    if (c.failure == OpenFailure::TooLarge)
      stats_.debug_files_too_large++;
    if (!c)
      return false;
    if (check_crc) {
      CrcOutcome crc = crc_budget_.crc(c.fd.get(), ours.max_size, deadline,
                                       [this] { return run_ending(); });
      switch (crc.stop) {
      case CrcStop::None:
        break;
      case CrcStop::Stopped:
        stats_.files_interrupted++;
        return false;
      case CrcStop::Deadline:
      case CrcStop::FileTime:
        stats_.files_over_time++;
        return false;
      case CrcStop::RunTime: // the file keeps its .eh_frame rows, if any
        stats_.debug_files_over_run_crc++;
        return false;
      case CrcStop::Unreadable:
        return false;
      }
      if (*crc.crc != f.cfi_headers.debuglink_crc)
        return false;
    }
    uint64_t t0 = monotonic_ns();
    auto cfi = unwind::read_elf_cfi(c.fd.get(), unwind::CfiWant::DebugFile);
    if (!cfi || cfi->debug_frame.empty() ||
        (!f.build_id.empty() && !cfi->build_id.empty() &&
         cfi->build_id != f.build_id))
      return false;
    std::vector<unwind::Row> debug_rows;
    if (!parse({cfi->debug_frame, 0, false}, deadline, debug_rows))
      return false;
    auto rows = unwind::merge_rows(eh_rows, debug_rows);
    if (rows.empty())
      return false;
    bool ok = build_and_store(f, std::move(rows), deadline);
    stats_.parse_ns += monotonic_ns() - t0;
    if (ok)
      stats_.files_from_debug_frame++;
    return ok;
  };
  const std::string &id = f.build_id;
  if (id.size() > 2) {
    std::string rel =
        "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    for (const std::string &dir : debug_dirs_) {
      UniqueFd d = open_root_dir(dir);
      if (d && try_file(open_in_root(d.get(), rel, ours), false))
        return true;
    }
  }
  const std::string &link = f.cfi_headers.debuglink;
  if (!link.empty() && link.find('/') == std::string::npos && link != "." &&
      link != "..") {
    const std::string dir = dirname_of(path);
    FilePolicy theirs = ours;
    theirs.reader = creds_of(files_, pid_dir(proc_root_, tgid));
    UniqueFd root = open_root_dir(pid_dir(proc_root_, tgid) + "/root");
    if (root && theirs.reader)
      for (const std::string &p : {dir + "/" + link, dir + "/.debug/" + link})
        if (try_file(open_in_root(root.get(), p, theirs), true))
          return true;
    for (const std::string &d : debug_dirs_) {
      UniqueFd dfd = open_root_dir(d);
      if (dfd &&
          try_file(open_in_root(dfd.get(), dir + "/" + link, ours), true))
        return true;
    }
  }
  return false;
}

void Unwinder::flush_rules() {
  const auto &all = rules_.rules();
  for (; rules_flushed_ < all.size(); rules_flushed_++) {
    const unwind::Rule &r = all[rules_flushed_];
    uw_rule v{r.cfa_off, r.bp_off, r.kind, r.flags};
    auto key = static_cast<uint32_t>(rules_flushed_);
    if (key >= sizes_.rules ||
        bpf_map_update_elem(fds_.rules, &key, &v, BPF_ANY) != 0)
      break;
  }
}

namespace {

// Writes values[i] at keys first..first+n-1 of an array map: in one batch
// where the kernel has it (5.6+), else one by one.
template <typename V>
bool write_array(int fd, uint32_t first, const std::vector<V> &values) {
  if (values.empty())
    return true;
  std::vector<uint32_t> keys(values.size());
  for (size_t i = 0; i < keys.size(); i++)
    keys[i] = first + static_cast<uint32_t>(i);
  __u32 count = static_cast<__u32>(values.size());
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  if (bpf_map_update_batch(fd, keys.data(), values.data(), &count, &opts) ==
          0 &&
      count == values.size())
    return true;
  for (size_t i = 0; i < values.size(); i++)
    if (bpf_map_update_elem(fd, &keys[i], &values[i], BPF_ANY) != 0)
      return false;
  return true;
}

} // namespace

bool Unwinder::store(File &f, const unwind::FileTable &t) {
  if (t.pages.empty() || t.runs.size() > UW_FILE_RUNS)
    return false;
  const uint64_t row_base = (next_row_ + UW_ROWS_PER_CHUNK - 1) /
                            UW_ROWS_PER_CHUNK * UW_ROWS_PER_CHUNK;
  const uint64_t rows_end = row_base + t.rows.size();
  if (next_file_ >= sizes_.files || rules_.rules().size() > sizes_.rules) {
    stats_.files_over_fixed++;
    return false;
  }
  if (uint64_t{next_page_} + t.pages.size() > sizes_.pages ||
      rows_end > uint64_t{sizes_.row_chunks} * UW_ROWS_PER_CHUNK) {
    stats_.files_over_cap++;
    return false;
  }
  flush_rules();
  std::vector<uw_chunk> chunks((t.rows.size() + UW_ROWS_PER_CHUNK - 1) /
                               UW_ROWS_PER_CHUNK);
  std::memset(chunks.data(), 0, chunks.size() * sizeof(uw_chunk));
  for (size_t i = 0; i < t.rows.size(); i++)
    chunks[i / UW_ROWS_PER_CHUNK].rows[i % UW_ROWS_PER_CHUNK] = t.rows[i];
  std::vector<uint64_t> pages(t.pages.size());
  for (size_t i = 0; i < pages.size(); i++)
    pages[i] = (t.pages[i] & 0xffffffff00000000ULL) |
               (row_base + (t.pages[i] & 0xffffffffu));
  uw_file entry{};
  for (size_t i = 0; i < t.runs.size(); i++)
    entry.runs[i] = {t.runs[i].first_page, t.runs[i].n_pages,
                     next_page_ + t.runs[i].first_index};
  uint32_t id = next_file_;
  // Rows and pages before the file entry that leads to them.
  if (!write_array(fds_.rows,
                   static_cast<uint32_t>(row_base / UW_ROWS_PER_CHUNK),
                   chunks) ||
      !write_array(fds_.pages, next_page_, pages) ||
      bpf_map_update_elem(fds_.files, &id, &entry, BPF_ANY) != 0) {
    stats_.files_over_cap++;
    return false;
  }
  next_row_ = rows_end;
  next_page_ += static_cast<uint32_t>(t.pages.size());
  next_file_++;
  f.id = id;
  f.table_base = t.base;
  stats_.files_loaded++;
  stats_.rows += t.rows.size();
  stats_.pages += t.pages.size();
  return true;
}

uint64_t Unwinder::kernel_bytes() const {
  return sizes_.bytes() + stats_.processes * sizeof(uw_proc);
}

std::vector<std::string>
Unwinder::describe(const std::array<uint64_t, UW_STAT_NR> &w) const {
  auto n = [](uint64_t v) { return std::to_string(v); };
  const UnwindStats &s = stats_;
  std::vector<std::string> out;
  out.push_back("user unwind tables: " + n(s.files_loaded) + " files (" +
                n(s.files_from_debug_frame) + " from .debug_frame), " +
                n(s.rows) + " rows, " + n(s.pages) + " pages, " +
                n(rules_.rules().size()) + " distinct rules; " +
                n(s.files_without_cfi) + " files without CFI, " +
                n(s.files_unreadable) + " unreadable, " + n(s.files_over_cap) +
                " over the memory cap, " + n(given_up()) +
                " over a file budget (frame pointers there), " +
                n(s.files_interrupted) + " dropped at the end of the run; " +
                n(s.processes) + " processes installed (" + n(s.installs) +
                " readings); built in " + n(s.parse_ns / 1000000) + " ms" +
                (defer_files_ ? "; " + n(s.files_deferred) +
                                    " files left until a walk reached them (" +
                                    n(s.files_reached) + " built later)"
                              : std::string()));
  uint64_t used =
      (next_row_ + UW_ROWS_PER_CHUNK - 1) / UW_ROWS_PER_CHUNK *
          sizeof(uw_chunk) +
      uint64_t{next_page_} * 8 + uint64_t{next_file_} * sizeof(uw_file) +
      rules_.rules().size() * sizeof(uw_rule) + s.processes * sizeof(uw_proc);
  out.push_back("user unwind memory: " + mib(kernel_bytes()) +
                " of kernel memory (" + mib(used) + " used; rows array " +
                mib(uint64_t{sizes_.row_chunks} * sizeof(uw_chunk)) +
                ", pages array " + mib(uint64_t{sizes_.pages} * 8) + ", cap " +
                mib(cap_) + " by " + cap_name_ + ")");
  out.push_back("user frames: " + n(w[UW_STAT_FRAMES_TABLE]) +
                " recovered by tables, " + n(w[UW_STAT_FRAMES_FP]) +
                " by frame pointers, in " + n(w[UW_STAT_WALKS]) +
                " walks; walks ended: " + n(w[UW_STAT_END_OF_STACK]) +
                " at the end of the stack, " + n(w[UW_STAT_END_FP]) +
                " where a frame-pointer chain ended, " + n(w[UW_STAT_OUTSIDE]) +
                " outside executable mappings, " + n(w[UW_STAT_READ_FAULT]) +
                " at unreadable stack, " + n(w[UW_STAT_UNSUPPORTED]) +
                " at CFI not followed, " + n(w[UW_STAT_BAD_FRAME]) +
                " at a frame that did not move up, " + n(w[UW_STAT_TRUNCATED]) +
                " at the depth limit, " + n(w[UW_STAT_STALE]) +
                " in mappings newer than their tables, " +
                n(w[UW_STAT_DEFERRED_FILE]) +
                " at a file whose table was not built yet");
  out.push_back("user unwind readiness: " + n(w[UW_STAT_NO_TABLES]) +
                " walks before their process's tables (frame pointers), " +
                n(w[UW_STAT_REWALKED]) + " walked again while blocked, " +
                n(w[UW_STAT_PARTIAL_ENDED]) + " charged before that, " +
                n(w[UW_STAT_PARENT_MAPS]) +
                " with the parent's mappings (fork), " + n(w[UW_STAT_BY_VMA]) +
                " through their files' tables before their own (exec), " +
                n(w[UW_STAT_REQUESTS]) + " table requests, " +
                n(w[UW_STAT_CACHE_MISSES]) + " rule cache misses");
  return out;
}

std::string
Unwinder::describe_losses(const std::array<uint64_t, UW_STAT_NR> &w) const {
  std::string out;
  auto line = [&](uint64_t n, const std::string &text) {
    if (n)
      out += "offcpu: warning: " + std::to_string(n) + " " + text + "\n";
  };
  const UnwindStats &s = stats_;
  const std::string fp = ": frame pointers used there";
  // Which limit sized the arrays decides what helps.
  std::string room;
  if (!sized_by_cap_)
    room = "the arrays were sized at start from the code mapped then (files "
           "mapped later did not fit; a larger --unwind-memory would not be "
           "used)";
  else if (cap_name_ == "--unwind-memory")
    room = "raise --unwind-memory (now " + mib(cap_) + ")";
  else
    room = "the cap is " + cap_name_ + " (" + mib(cap_) + ")";
  line(s.files_over_cap,
       "files had no room for their unwind tables (" + room + ")" + fp);
  line(s.processes_over_cap,
       "processes had no room for their mappings (" +
           std::to_string(max_procs_) +
           " at most, from the processes at start and the cap): frame "
           "pointers used for them");
  line(s.files_over_fixed, "files past the unwinder's limit of " +
                               std::to_string(UW_MAX_FILES) + " files or " +
                               std::to_string(UW_MAX_RULES) +
                               " distinct rules" + fp);
  line(s.files_over_rows, "files over their row budget (" +
                              std::to_string(unwind::CfiBudget{}.max_rows) +
                              " rows each)" + fp);
  line(s.files_over_steps, "files over their CFI step budget (" +
                               std::to_string(unwind::CfiBudget{}.max_steps) +
                               " instructions each)" + fp);
  line(s.files_over_time,
       "files over their time budget (" +
           std::to_string(kFileBudgetNs / 1000000) +
           " ms each to read CFI, check a debug file and build a table)" + fp);
  line(s.files_over_pages, "files over their page budget (rows spread over "
                           "far more code than they describe)" +
                               fp);
  line(s.files_over_run_cfi, "files after the run's CFI budget (" +
                                 std::to_string(kRunSteps) +
                                 " instructions) was spent" + fp);
  line(s.files_over_rules, "files over their rule budget (" +
                               std::to_string(kMaxNewRulesPerFile) +
                               " new distinct rules each)" + fp);
  line(rules_.overflowed(), "table rows whose rule did not fit the table of " +
                                std::to_string(UW_MAX_RULES) +
                                " distinct rules: walks stop there");
  line(s.rules_outside_code,
       "CFI rules outside their file's executable segments dropped");
  line(s.debug_files_too_large,
       "debug files larger than their binary allows (" +
           debug_file_size_rule() + "): not read");
  line(s.debug_files_over_run_crc,
       "debug files not checked: the run's " +
           std::to_string(kCrcNsPerRun / 1000000) +
           " ms of debug-file CRCs were spent (their binaries' tables come "
           "from .eh_frame alone)");
  line(s.vdso_images_over, "vDSO mappings past " +
                               std::to_string(kMaxVdsoImages) +
                               " distinct images (rewritten by their "
                               "processes)" +
                               fp);
  line(w[UW_STAT_REQUESTS_LOST],
       "unwind table requests lost (ring full); asked again on the next "
       "change");
  return out;
}

std::string Unwinder::describe_mapping_losses(
    const CountEntries &counts,
    const std::unordered_map<uint64_t, std::vector<uint64_t>> &stacks) const {
  if (over_mappings_.empty())
    return "";
  MappingFit sum;
  for (const auto &kv : over_mappings_) {
    sum.demoted += kv.second.demoted;
    sum.demoted_bytes += kv.second.demoted_bytes;
    sum.spanned += kv.second.spanned;
  }
  // The waits whose user stacks have a frame there: walked on by frame
  // pointers, they may be short.
  uint64_t waits = 0, ns = 0;
  for (const auto &[key, val] : counts) {
    auto proc = over_mappings_.find(key.tgid);
    auto stack = stacks.find(key.user_stack);
    if (proc == over_mappings_.end() || stack == stacks.end())
      continue;
    const auto &ranges = proc->second.ranges; // sorted, disjoint
    bool hit = std::any_of(
        stack->second.begin(), stack->second.end(), [&](uint64_t pc) {
          auto it = std::upper_bound(
              ranges.begin(), ranges.end(), pc,
              [](uint64_t v, const auto &r) { return v < r.first; });
          return it != ranges.begin() && pc < std::prev(it)->second;
        });
    if (hit) {
      waits += val.count;
      ns += val.total_ns;
    }
  }
  char cost[64];
  snprintf(cost, sizeof(cost), "%.3f s", static_cast<double>(ns) / 1e9);
  return "offcpu: warning: " + std::to_string(over_mappings_.size()) +
         " processes had more executable mappings than the unwinder holds (" +
         std::to_string(UW_MAX_MAPPINGS) +
         " each): " + std::to_string(sum.demoted) +
         " of their smaller file mappings (" + mib(sum.demoted_bytes) +
         " of code) were left without unwind " + "tables, and " +
         std::to_string(sum.spanned) +
         " gaps between mappings without tables were taken for code; " +
         std::to_string(waits) + " waits (" + cost +
         " off CPU) have frames walked there by frame pointers and may be "
         "short (a fixed limit: no option raises it)\n";
}

} // namespace offcpu
