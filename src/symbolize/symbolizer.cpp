#include "symbolize/symbolizer.h"

#include <sys/auxv.h>
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <unordered_set>
#include <utility>

#include "symbolize/demangle.h"
#include "symbolize/exec_path.h"
#include "symbolize/map_files.h"
#include "symbolize/xz.h"
#include "util/clock.h"
#include "util/debug_file.h"
#include "util/flat_memo.h"
#include "util/parse.h"
#include "util/signals.h"

namespace offcpu {
namespace {

constexpr std::size_t kMaxMapsBytes = 64u << 20;
// A perf map is scanned up to this much; JIT maps of huge heaps reach tens
// of MB. The scan keeps only the names it needs, whatever the size.
constexpr uint64_t kMaxPerfMapBytes = uint64_t{256} << 20;
// MiniDebugInfo, decompressed: real ones are well under a MiB.
constexpr size_t kMaxMiniDebugInfoImage = size_t{64} << 20;
// A vDSO is a few pages; distinct images beyond these (processes that
// rewrote theirs) are not parsed.
constexpr uint64_t kMaxVdsoBytes = 1u << 20;
constexpr size_t kMaxVdsoImages = 16;
// Addresses per file handed to the DWARF loader ahead of naming.
constexpr size_t kMaxWarmOffsets = size_t{1} << 16;
// Files held open, unparsed, until a stack reaches them: past these the
// oldest is queued to be parsed (and closed) anyway. With the limits below,
// well within the 1,024 descriptors a process gets by default.
constexpr size_t kMaxUnparsedOpen = 256;
// Files parsed before a stack reached them (past kMaxUnparsedOpen) keep
// their DWARF's descriptor for the stack that may come, at most these many:
// past them the oldest is let go, and counted if a stack reaches it later.
// One user's process can map thousands of files with DWARF; every one kept
// open took a descriptor from the run (1,500 held, and past the 1,024 a
// process gets by default, other processes' files went unread).
constexpr size_t kMaxIdleDwarf = 128;
// Files past kMaxUnparsedOpen wait, open, to be parsed between polls; a
// process mapping thousands of files queued them all at once (1,000
// descriptors for a moment). Past these the oldest is let go unread, and
// counted if a stack reaches it.
constexpr size_t kMaxForcedOpen = 256;
// Files whose DWARF one run reads: each holds its descriptor to the end.
constexpr uint64_t kMaxDwarfFiles = 256;

// Files waiting open in `queue`, oldest first, each marked by `flag`, of
// which `count` are still marked (an entry whose flag was cleared since, its
// file gone on, is skipped): past `max`, the oldest are unmarked and let go
// by `close`.
template <typename Entry, typename Close>
void keep_at_most(std::deque<Entry *> &queue, size_t &count, size_t max,
                  bool Entry::*flag, Close close) {
  while (count > max && !queue.empty()) {
    Entry *oldest = queue.front();
    queue.pop_front();
    if (!(oldest->*flag))
      continue;
    oldest->*flag = false;
    count--;
    close(*oldest);
  }
}

// Whether the open file is the executable this process runs (offcpu's own,
// traced by a whole-system run).
bool is_own_executable(int fd) {
  static const std::pair<dev_t, ino_t> own = [] {
    struct stat st {};
    if (stat("/proc/self/exe", &st) != 0)
      return std::pair<dev_t, ino_t>{0, 0};
    return std::pair<dev_t, ino_t>{st.st_dev, st.st_ino};
  }();
  struct stat st {};
  return fd >= 0 && own.second != 0 && fstat(fd, &st) == 0 &&
         st.st_dev == own.first && st.st_ino == own.second;
}

// From /proc/PID/status: the PID in the process's own namespace (the number
// a JIT in a container puts in its perf map's name: last field of NSpid)
// and its effective user and group (files are read only if they could).
struct ProcStatus {
  std::string ns_pid;
  std::optional<Credentials> creds;
};

std::string status_field(const std::string &status, const char *name) {
  std::string key = std::string("\n") + name + ":";
  size_t at = status.find(key);
  if (at == std::string::npos)
    return {};
  at += key.size();
  size_t end = status.find('\n', at);
  return status.substr(at, end == std::string::npos ? end : end - at);
}

std::vector<std::string> fields_of(const std::string &line) {
  std::vector<std::string> out;
  std::string_view rest(line);
  for (std::string_view f = next_field(rest); !f.empty(); f = next_field(rest))
    out.emplace_back(f);
  return out;
}

bool all_digits(const std::string &s) {
  return !s.empty() && s.size() < 11 &&
         s.find_first_not_of("0123456789") == std::string::npos;
}

ProcStatus parse_status(const std::string &status) {
  ProcStatus out;
  auto ns = fields_of(status_field(status, "NSpid"));
  if (!ns.empty() && all_digits(ns.back()))
    out.ns_pid = ns.back();
  auto uid = fields_of(status_field(status, "Uid"));
  auto gid = fields_of(status_field(status, "Gid"));
  // Real, effective, saved, filesystem: the effective ids decide access.
  if (uid.size() >= 2 && gid.size() >= 2 && all_digits(uid[1]) &&
      all_digits(gid[1]))
    out.creds = Credentials{static_cast<uid_t>(std::stoul(uid[1])),
                            static_cast<gid_t>(std::stoul(gid[1]))};
  return out;
}

std::string basename_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a mapping's file is named by: the path the process was run by for
// its executable run through a symlink (exec_path.h), else maps' path.
std::string shown_path(const std::optional<ExecPath> &exec, const Mapping &m) {
  std::string path = m.real_path();
  return exec ? exec->name_for(path) : path;
}

std::string dirname_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// JIT code lives in anonymous executable memory or in a memfd (.NET's
// double mapping); only processes with such mappings get their perf map
// looked for.
bool may_have_jit_code(const std::vector<Mapping> &maps) {
  for (const Mapping &m : maps)
    if (m.executable && (m.path.empty() || m.path.rfind("[anon", 0) == 0 ||
                         m.path.rfind("/memfd:", 0) == 0))
      return true;
  return false;
}

} // namespace

const char *file_kind_name(FileKind k) {
  switch (k) {
  case FileKind::Binary:
    return "mapped files";
  case FileKind::DebugFile:
    return "debug files";
  case FileKind::PerfMap:
    return "perf maps";
  case FileKind::Count:
    break;
  }
  return "files";
}

struct Symbolizer::Process {
  std::vector<std::vector<Mapping>> readings; // oldest first
  // Each stack's reading (SIZE_MAX: none), and whether it is newer than
  // the last one, noted once the process was gone (an exec's first
  // reading, before ld.so mapped the libraries): its frames outside that
  // reading are counted as a process's gone before its maps were read.
  struct StackReading {
    size_t reading = SIZE_MAX;
    bool newer = false;
  };
  // Open-addressed: a process of a busy server notes thousands of stacks,
  // one insert each while the window is open (a node-based map's
  // allocation and rehashing were 4% of offcpu's CPU under pgbench).
  FlatMemo<uint64_t, StackReading, std::hash<uint64_t>> stack_reading;
  StackReading &reading_of(uint64_t stack_id) {
    if (StackReading *r = stack_reading.find(stack_id))
      return *r;
    return stack_reading.add(stack_id, {});
  }
  size_t selected = SIZE_MAX;  // reading for the stack being named
  bool selected_newer = false; // the stack being named is newer than it
  bool captured = false;       // status read, root and perf map looked for
  std::string ns_pid;
  std::optional<Credentials> creds;
  RootRef root;
  UniqueFd perf_map; // open for reading, held so an exit cannot take it
  std::vector<uint64_t> perf_wanted; // sorted addresses to name from it
  std::optional<std::unordered_map<uint64_t, std::string>> perf_names;
  bool gone = false;           // no maps of its own or inherited: counted once
  bool python_decided = false; // looked at for an interpreter (python_)
  // Readings looked at for JIT code so far (may_have_jit_code), and whether
  // any had some: each stack noted asks.
  size_t jit_readings = 0;
  bool jit_possible = false;
  // Its [vdso] image, read while it lives (it may have rewritten it), and
  // the symbols that name it once looked up.
  std::optional<std::string> vdso_image;
  bool vdso_resolved = false;
  ElfFile *vdso = nullptr;
  std::optional<ExecPath> exec; // the path it was run by, read once
};

struct Symbolizer::FileEntry {
  Mapping mapping; // where it was first seen (its path, for debuglink)
  UniqueFd fd;     // open for reading until parsed
  uint64_t size = 0;
  RootRef root; // the mapping process's root, for debug files inside it
  std::optional<Credentials> creds;
  uid_t owner = 0; // of the file: its debug files must be root's or theirs
  std::unique_ptr<ElfFile> elf;
  bool parsed = false;
  bool queued = false;  // in to_parse_
  bool waiting = false; // in unparsed_, in no stack yet
  bool forced = false;  // in forced_: queued past kMaxUnparsedOpen
  bool let_go = false;  // closed unread (kMaxForcedOpen), not yet counted
  // Where a stack reached it once let go: opened again from there.
  uint32_t reach_tgid = 0;
  const Mapping *reach = nullptr; // in Process::readings (kept to the end)
  std::string debug_file;         // found by build id in a debug root of ours
  // The file holding its DWARF (itself or its debug file), open until
  // parsed; then handed to the loader; then its DWARF, read once.
  UniqueFd dwarf_fd;
  bool dwarf_idle = false;   // in idle_dwarf_: dwarf_fd kept for a stack
  bool dwarf_let_go = false; // dwarf_fd closed unread (idle too long)
  DwarfLoader::Ticket dwarf_ticket = 0;
  std::unique_ptr<DwarfFile> dwarf;
  // Offsets in the file its stacks hold: the loader looks them up ahead.
  std::unordered_set<uint64_t> warm_offsets;
};

Symbolizer::Symbolizer(const FileReader &files, KernelSymbols kernel,
                       std::string proc_root)
    : files_(files), kernel_(std::move(kernel)),
      proc_root_(std::move(proc_root)), python_(files_, proc_root_) {}

Symbolizer::~Symbolizer() = default;

void Symbolizer::refuse(FileKind kind, OpenFailure why) {
  if (why != OpenFailure::None && why != OpenFailure::Missing)
    stats_.refused[static_cast<size_t>(kind)][static_cast<size_t>(why)]++;
}

const ModuleInfo *Symbolizer::module_info(const std::string &path,
                                          const std::string &build_id,
                                          const std::string &debug_file) {
  auto &slot = modules_[{path, build_id}];
  if (!slot)
    slot = std::make_unique<ModuleInfo>(ModuleInfo{path, build_id, {}});
  if (slot->debug_file.empty())
    slot->debug_file = debug_file;
  return slot.get();
}

std::string Symbolizer::kernel_frame(uint64_t addr, bool is_return_address,
                                     const ModuleInfo **module,
                                     FrameCounts *counts) {
  uint64_t lookup = is_return_address && addr > 0 ? addr - 1 : addr;
  auto sym = kernel_.find(lookup);
  if (module)
    *module = module_info(sym && !sym->module.empty()
                              ? "[" + std::string(sym->module) + "]"
                              : "[kernel.kallsyms]",
                          "");
  if (!sym) {
    unnamed("[kernel]", false);
    if (counts)
      *counts = {0, 1, 0, 0, last_unnamed_};
    return "[unknown]";
  }
  stats_.named++;
  if (counts)
    *counts = {1, 0, 0, 0, nullptr};
  std::string name(sym->name);
  if (!sym->module.empty())
    name.append(" [").append(sym->module).append("]");
  return name;
}

// ---- capture ----

Symbolizer::RootRef Symbolizer::root_of(uint32_t tgid) {
  UniqueFd fd =
      open_root_dir(proc_root_ + "/" + std::to_string(tgid) + "/root");
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0)
    return nullptr;
  auto &slot = roots_[{st.st_dev, st.st_ino}];
  if (!slot)
    slot = std::make_shared<const UniqueFd>(std::move(fd));
  return slot;
}

Symbolizer::Process &Symbolizer::process(uint32_t tgid) {
  auto &slot = processes_[tgid];
  if (!slot) {
    slot = std::make_unique<Process>();
    read_maps(tgid, *slot);
  }
  return *slot;
}

// Its credentials and root: needed to open its files by path, its perf
// map and debug files inside its root. Read once, and only when needed, so
// that capturing a process whose files are all known is one maps read.
void Symbolizer::capture_process(uint32_t tgid, Process &p) {
  if (!p.captured) {
    std::string dir = proc_root_ + "/" + std::to_string(tgid);
    if (auto status = files_.read(dir + "/status", 1u << 16)) {
      ProcStatus st = parse_status(*status);
      p.ns_pid = st.ns_pid;
      p.creds = st.creds;
      p.root = root_of(tgid);
      p.captured = true;
    }
  }
}

// The process's perf map, opened inside its root (a JIT in a container
// writes its own /tmp), never through a symlink, owned by the process's
// user (or root) and readable by it, as perf requires. Held open: JITs
// append to it, and it stays readable after the process is gone.
void Symbolizer::capture_perf_map(uint32_t tgid, Process &p) {
  if (p.perf_map || p.readings.empty())
    return;
  if (p.jit_readings != p.readings.size()) {
    p.jit_readings = p.readings.size();
    p.jit_possible = may_have_jit_code(p.readings.back());
  }
  if (!p.jit_possible)
    return;
  capture_process(tgid, p);
  if (!p.root || !p.creds)
    return;
  std::string ns = p.ns_pid.empty() ? std::to_string(tgid) : p.ns_pid;
  FilePolicy policy;
  policy.owner = p.creds->uid;
  policy.reader = p.creds;
  policy.max_size = UINT64_MAX; // scanned in part if huge
  CheckedFile f =
      open_in_root(p.root->get(), "/tmp/perf-" + ns + ".map", policy);
  if (f)
    p.perf_map = std::move(f.fd);
  else
    refuse(FileKind::PerfMap, f.failure);
}

namespace {

bool same_maps(const std::vector<Mapping> &a, const std::vector<Mapping> &b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Mapping &x, const Mapping &y) {
                      return x.start == y.start && x.end == y.end &&
                             x.offset == y.offset && x.inode == y.inode &&
                             x.dev_major == y.dev_major &&
                             x.dev_minor == y.dev_minor &&
                             x.executable == y.executable && x.path == y.path;
                    });
}

} // namespace

bool Symbolizer::read_maps(uint32_t tgid, Process &p) {
  auto text = files_.read(proc_root_ + "/" + std::to_string(tgid) + "/maps",
                          kMaxMapsBytes);
  if (!text || text->empty())
    return false;
  std::vector<Mapping> fresh = parse_proc_maps(*text);
  // Unchanged (a stack's frame-pointer junk in [heap] asks again each
  // time): the latest reading stands, and no copy is kept to the end.
  if (!p.readings.empty() && same_maps(p.readings.back(), fresh)) {
    capture_perf_map(tgid, p);
    return true;
  }
  p.readings.push_back(std::move(fresh));
  // Kept to the end of the run (naming): a whole system's readings were
  // 15 MB of the peak heap, up to half of it spare capacity.
  p.readings.back().shrink_to_fit();
  capture_files(tgid, p);
  capture_perf_map(tgid, p);
  if (!p.exec) {
    capture_process(tgid, p);
    p.exec = exec_path_of(files_, proc_root_ + "/" + std::to_string(tgid),
                          p.root && *p.root ? p.root->get() : -1);
  }
  return true;
}

// The file mapped at `m` by the process at `pid_dir` (its /proc entry).
CheckedFile Symbolizer::open_mapped(const std::string &pid_dir,
                                    const Process &p, const Mapping &m) {
  CheckedFile opened = open_map_file(pid_dir, m);
  if (!opened && p.root && p.creds && !m.deleted()) {
    // The path, inside the process's root, readable by its user, and only
    // if it is still the file that was mapped.
    FilePolicy mapped;
    mapped.follow_last_symlink = true;
    mapped.max_size = UINT64_MAX; // only the sections used are read
    mapped.reader = p.creds;
    opened = open_in_root(p.root->get(), m.path, mapped);
    if (opened && m.inode &&
        static_cast<uint64_t>(opened.st.st_ino) != m.inode) {
      opened = CheckedFile{};
      opened.failure = OpenFailure::Missing; // replaced since: not ours
    }
  }
  return opened;
}

// Opens the files of the latest reading while the process exists:
// /proc/PID/map_files leads to them only as long as it does.
void Symbolizer::capture_files(uint32_t tgid, Process &p) {
  std::string pid_dir = proc_root_ + "/" + std::to_string(tgid);
  for (const Mapping &m : p.readings.back()) {
    if (!m.executable)
      continue;
    if (m.path == "[vdso]") {
      vdso_for(tgid, m);
      continue;
    }
    if (!m.is_file())
      continue;
    FileKey key{m.dev_major, m.dev_minor, m.inode, m.inode ? "" : m.path};
    auto &slot = files_by_key_[key];
    if (slot)
      continue;
    slot = std::make_unique<FileEntry>();
    FileEntry &f = *slot;
    capture_process(tgid, p); // a new file: its debug files are in p's root
    f.mapping = m;
    f.root = p.root;
    f.creds = p.creds;
    CheckedFile opened = open_mapped(pid_dir, p, m);
    if (!opened) {
      refuse(FileKind::Binary, opened.failure);
      f.parsed = true;
      continue;
    }
    f.size = static_cast<uint64_t>(opened.st.st_size);
    f.owner = opened.st.st_uid;
    f.fd = std::move(opened.fd);
    // Parsed once a stack reaches it: a process maps many files its stacks
    // never pass through (Debian's redis-server maps 18, calls into few).
    f.waiting = true;
    waiting_++;
    unparsed_.push_back(&f);
    while (waiting_ > kMaxUnparsedOpen && !unparsed_.empty()) {
      FileEntry *oldest = unparsed_.front();
      unparsed_.pop_front();
      if (oldest->waiting)
        force_parse(*oldest);
    }
  }
}

// Queued for parsing though no stack reached it yet: at most kMaxForcedOpen
// such files hold their descriptors at once.
void Symbolizer::force_parse(FileEntry &f) {
  queue_parse(f);
  if (f.parsed || f.forced)
    return;
  f.forced = true;
  forced_count_++;
  forced_.push_back(&f);
  keep_at_most(forced_, forced_count_, kMaxForcedOpen, &FileEntry::forced,
               [](FileEntry &oldest) {
                 oldest.fd.reset();
                 oldest.parsed = true; // no symbols: [module] unless reopened
                 oldest.let_go = true;
               });
}

void Symbolizer::queue_parse(FileEntry &f) {
  if (f.waiting) {
    f.waiting = false;
    waiting_--;
  }
  if (f.parsed || f.queued)
    return;
  f.queued = true;
  to_parse_.push_back(&f);
}

// The files of a stack's frames (`found`: each frame's mapping, or null),
// for parse_pending.
void Symbolizer::queue_files_of(uint32_t tgid,
                                const std::vector<const Mapping *> &found) {
  for (const Mapping *m : found) {
    FileEntry *f = m && m->is_file() ? file_for(*m) : nullptr;
    if (!f)
      continue;
    if (f->forced) {
      // Reached: parsed like any file a stack reaches, never let go.
      f->forced = false;
      forced_count_--;
    }
    if (f->let_go && !f->reach_tgid) {
      // Let go unread (too many waited open): opened again through this
      // mapping right before it is parsed, one at a time (its process is
      // blocked on this stack now, and likely still is then).
      f->reach_tgid = tgid;
      f->reach = m;
      to_parse_.push_back(f);
      continue;
    }
    queue_parse(*f);
  }
}

// A file let go unread, opened again through a mapping a stack reached and
// parsed; else counted, once (parse).
void Symbolizer::parse_let_go(FileEntry &f, uint32_t tgid, const Mapping &m) {
  CheckedFile again =
      open_mapped(proc_root_ + "/" + std::to_string(tgid), process(tgid), m);
  if (again) {
    f.fd = std::move(again.fd);
    f.let_go = false;
    f.parsed = false;
  }
  parse(f);
}

void Symbolizer::note_user_stack(uint32_t tgid, uint64_t stack_id,
                                 const std::vector<uint64_t> &all,
                                 uint32_t parent) {
  // Python frames (tagged words after the native ones) are no addresses.
  size_t native = 0;
  std::vector<PythonFrameWord> py = python_frames_of(all, &native);
  const std::vector<uint64_t> ips(all.begin(),
                                  all.begin() + static_cast<long>(native));
  note_native_stack(tgid, stack_id, ips, parent);
  Process &p = process(tgid);
  if (source_.python && !p.python_decided && !p.readings.empty())
    decide_python(tgid, p);
  if (!py.empty())
    python_.capture(tgid, py); // names read while the process lives
}

// Whether the process is a Python whose frames BPF should walk: decided
// once, from its first reading of maps that shows an interpreter running.
void Symbolizer::decide_python(uint32_t tgid, Process &p) {
  PythonProcess py = find_python(files_, proc_root_, tgid, p.readings.back());
  if (py.retry)
    return;
  p.python_decided = true;
  if (py.bpf.runtime)
    python_.set_layout(tgid, py.layout);
  python_decisions_.push_back({tgid, py});
}

void Symbolizer::note_native_stack(uint32_t tgid, uint64_t stack_id,
                                   const std::vector<uint64_t> &ips,
                                   uint32_t parent) {
  auto &slot = processes_[tgid];
  if (!slot)
    slot = std::make_unique<Process>();
  Process &p = *slot;
  // Code is executable: an address in data of the reading (dlopen maps
  // ld.so.cache, unmaps it and may put the library where it was) means
  // the reading is older than the stack. The mappings found are kept for
  // warm_dwarf while that reading is still the last.
  std::vector<const Mapping *> &found = found_mappings_;
  auto covered = [&](const std::vector<Mapping> &maps) {
    found.clear();
    for (size_t i = 0; i < ips.size(); i++) {
      const Mapping *m =
          find_mapping(maps, i > 0 && ips[i] ? ips[i] - 1 : ips[i]);
      if (!m || !m->executable)
        return false;
      found.push_back(m);
    }
    return true;
  };
  const bool same_reading = !p.readings.empty() && covered(p.readings.back());
  if (!same_reading) {
    if (!read_maps(tgid, p)) {
      // Gone already. A child forked without exec has its parent's image:
      // its parent's maps name its frames.
      if (!p.readings.empty()) {
        p.reading_of(stack_id).newer = true;
        return;
      }
      if (parent == 0 || parent == tgid)
        return;
      auto &ps = processes_[parent];
      if (!ps) {
        ps = std::make_unique<Process>();
        read_maps(parent, *ps);
      }
      if (ps->readings.empty() || !covered(ps->readings.back()))
        return;
      p.readings.push_back(ps->readings.back());
      stats_.processes_inherited++;
    }
  } else {
    capture_perf_map(tgid, p); // a JIT may have started writing one
  }
  p.reading_of(stack_id).reading = p.readings.size() - 1;
  capture_vdso(tgid, p, ips);
  if (!same_reading) { // each frame's mapping in the reading it now has
    found.clear();
    for (size_t i = 0; i < ips.size(); i++)
      found.push_back(find_mapping(p.readings.back(),
                                   i > 0 && ips[i] ? ips[i] - 1 : ips[i]));
  }
  queue_files_of(tgid, found);
  warm_dwarf(ips, found);
}

// The stack's addresses in files, for the loader to look up in their DWARF
// while the window is open (now if the file is parsed, else once it is).
void Symbolizer::warm_dwarf(const std::vector<uint64_t> &ips,
                            const std::vector<const Mapping *> &found) {
  if (!source_.dwarf || !symbolize_user_)
    return;
  for (size_t i = 0; i < ips.size(); i++) {
    const uint64_t lookup = i > 0 && ips[i] ? ips[i] - 1 : ips[i];
    const Mapping *m = found[i];
    FileEntry *f = m && m->is_file() ? file_for(*m) : nullptr;
    if (f)
      count_dwarf_let_go(*f);
    if (!f || f->dwarf || (f->parsed && !f->dwarf_ticket && !f->dwarf_fd) ||
        f->warm_offsets.size() >= kMaxWarmOffsets)
      continue;
    const uint64_t offset = lookup - m->start + m->offset;
    if (!f->warm_offsets.insert(offset).second)
      continue;
    if (!f->dwarf_ticket) {
      if (f->parsed)
        submit_dwarf(*f); // its first address in a stack: read it now
      continue;
    }
    if (auto vaddr =
            f->elf ? f->elf->file_offset_to_vaddr(offset) : std::nullopt)
      dwarf_loader_.warm(f->dwarf_ticket, *vaddr);
  }
}

// The process's [vdso] image, once, if one of its frames is in it: read now,
// while it lives, so that it is named from what it really ran.
void Symbolizer::capture_vdso(uint32_t tgid, Process &p,
                              const std::vector<uint64_t> &ips) {
  if (p.vdso_image || p.vdso_resolved || p.readings.empty())
    return;
  for (const Mapping &m : p.readings.back()) {
    if (m.path != "[vdso]" || m.end - m.start > kMaxVdsoBytes)
      continue;
    for (uint64_t ip : ips)
      if (ip > m.start && ip <= m.end) {
        p.vdso_image =
            files_.read_at(proc_root_ + "/" + std::to_string(tgid) + "/mem",
                           m.start, m.end - m.start);
        return;
      }
  }
}

// ---- parsing ----

bool Symbolizer::parse_pending(uint64_t deadline_ns) {
  in_window_ = true;
  while (!to_parse_.empty()) {
    if (stop_requested() || monotonic_ns() >= deadline_ns)
      break;
    FileEntry *f = to_parse_.front();
    to_parse_.pop_front();
    if (!f->let_go)
      parse(*f);
    else if (f->reach_tgid) // a stack reached it since
      parse_let_go(*f, f->reach_tgid, *f->reach);
  }
  in_window_ = false;
  return to_parse_.empty();
}

void Symbolizer::parse(FileEntry &f) {
  if (f.let_go) {
    f.let_go = false; // counted once, when a stack or a name needs it
    stats_.files_let_go++;
  }
  if (f.parsed)
    return;
  f.parsed = true;
  if (f.fd && past_deadline()) {
    stats_.files_unread_at_end++; // its frames show as [module]
  } else if (f.fd) {
    f.elf = read_elf(f.fd.get());
    if (f.elf) {
      if (!f.elf->has_symtab())
        find_debug_file(f);
      if (crc_stopped_ || debuginfod_deferred_) {
        // A stop signal ended the window during its debug file's CRC, or
        // its debug file is to be fetched (which would hold up the poll
        // loop): read again when its frames are named, within naming's own
        // deadline.
        crc_stopped_ = debuginfod_deferred_ = false;
        f.elf.reset();
        f.parsed = false;
        return;
      }
      stats_.elf_files_parsed++;
      if (!source_.own_dwarf && (f.dwarf_fd || f.elf->has_debug_info()) &&
          is_own_executable(f.fd.get())) {
        stats_.own_dwarf_skipped = true;
        f.dwarf_fd.reset();
      } else if (source_.dwarf && !f.dwarf_fd && f.elf->has_debug_info()) {
        // Its own DWARF, unless a debug file gave some.
        f.dwarf_fd = std::move(f.fd);
      }
      // Its DWARF read on the loader's thread once one of its addresses is
      // in a stack (now, if one was before it was parsed): in the window,
      // the main thread goes on polling, and the end of the run finds it
      // read. A file mapped but in no stack is not read at all (libc6-dbg's
      // ld.so and libm debug files were inflated on every run, for none).
      if (f.dwarf_fd && !f.warm_offsets.empty())
        submit_dwarf(f);
      else if (f.dwarf_fd && in_window_)
        hold_idle_dwarf(f); // (naming submits it right after: dwarf_for)
    }
  }
  f.fd.reset();
  if (f.forced) {
    // Closed: its entry in forced_ is skipped. (A file whose debug file is
    // left for naming returns above, still open and still counted.)
    f.forced = false;
    forced_count_--;
  }
}

bool Symbolizer::past_deadline() const {
  return deadline_ns_ && monotonic_ns() >= deadline_ns_;
}

// The per-file budgets, and no reading past the end of the run's.
SymbolLimits Symbolizer::limits_now() const {
  SymbolLimits limits;
  limits.data_symbols = data_symbols_;
  if (deadline_ns_) {
    const uint64_t now = monotonic_ns();
    limits.max_ns =
        std::min(limits.max_ns, deadline_ns_ > now ? deadline_ns_ - now : 0);
  }
  return limits;
}

void Symbolizer::count_loss(const ElfFile *elf) {
  if (!elf || elf->symbol_loss() == SymbolLoss::None)
    return;
  if (elf->symbol_loss() == SymbolLoss::Time && past_deadline())
    stats_.files_unread_at_end++; // the run's end cut it, not its own share
  else
    stats_.symbol_losses[static_cast<size_t>(elf->symbol_loss())]++;
}

std::unique_ptr<ElfFile> Symbolizer::read_elf(int fd) {
  auto elf = ElfFile::open_fd(fd, limits_now(), &symbol_budget_);
  count_loss(elf.get());
  return elf;
}

std::unique_ptr<ElfFile> Symbolizer::read_elf_image(std::string image) {
  auto elf =
      ElfFile::open_memory(std::move(image), limits_now(), &symbol_budget_);
  count_loss(elf.get());
  return elf;
}

bool Symbolizer::adopt_debug(FileEntry &f, CheckedFile debug, bool check_crc) {
  if (!debug) {
    refuse(FileKind::DebugFile, debug.failure);
    return false;
  }
  // A debug file speaks for its binary only if its owner could have
  // written the binary itself: the file may be mapped by other users'
  // processes too (one entry per device and inode), whose frames it names.
  if (debug.st.st_uid != 0 && debug.st.st_uid != f.owner) {
    stats_.debug_files_untrusted++;
    return false;
  }
  ElfFile &file = *f.elf;
  uint64_t size = static_cast<uint64_t>(debug.st.st_size);
  if (check_crc) {
    // In the window, its end (planned or by a signal) stops it: the file is
    // read again when named. While naming, the run's deadline does.
    CrcOutcome crc = crc_budget_.crc(debug.fd.get(), size, deadline_ns_, [&] {
      return in_window_ &&
             (stop_requested() ||
              (window_end_ns_ && monotonic_ns() >= window_end_ns_));
    });
    if (crc.stop == CrcStop::Stopped) {
      crc_stopped_ = true;
      return false;
    }
    if (crc.stop == CrcStop::Deadline) {
      stats_.files_unread_at_end++;
      return false;
    }
    if (!crc.crc) {
      stats_.debug_files_skipped++;
      return false;
    }
    if (*crc.crc != file.debuglink_crc())
      return false;
  }
  if (past_deadline()) {
    stats_.files_unread_at_end++;
    return false;
  }
  auto elf = read_elf(debug.fd.get());
  if (!elf || !elf->has_symtab())
    return false;
  // Found by build id, it must carry that id: one without could be any
  // root-owned ELF a user's namespace put at that path. Found by debuglink,
  // the CRC vouched for it.
  bool same_id = elf->build_id() == file.build_id();
  if (check_crc
          ? !same_id && !elf->build_id().empty() && !file.build_id().empty()
          : !same_id)
    return false;
  stats_.elf_files_parsed++;
  if (source_.dwarf && elf->has_debug_info())
    f.dwarf_fd = std::move(debug.fd);
  file.adopt_symbols(std::move(*elf));
  return true;
}

// Plausible sizes only, checked before anything is read: ours (trusted
// debug directories) and theirs (inside the process's root, readable by its
// user).
struct Symbolizer::DebugPolicies {
  FilePolicy ours, theirs;
  explicit DebugPolicies(const FileEntry &f) {
    ours.follow_last_symlink = true;
    ours.max_size = max_debug_file_bytes(f.size);
    theirs = ours;
    theirs.reader = f.creds;
  }
};

// Adopts the debug file if it opened and fits; counts one that was too big.
bool Symbolizer::try_debug_file(FileEntry &f, CheckedFile c, bool crc) {
  if (c.failure == OpenFailure::TooLarge) {
    stats_.debug_files_skipped++; // its own line, not also a refusal
    return false;
  }
  return c.failure != OpenFailure::Missing && adopt_debug(f, std::move(c), crc);
}

// 1. By build id, in each debug root, ours and the process's.
bool Symbolizer::debug_by_build_id(FileEntry &f, const DebugPolicies &pol) {
  const std::string &id = f.elf->build_id();
  if (id.size() <= 2)
    return false;
  std::string rel =
      "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  for (const std::string &dir : debug_dirs_) {
    UniqueFd dir_fd = open_root_dir(dir);
    if (dir_fd &&
        try_debug_file(f, open_in_root(dir_fd.get(), rel, pol.ours), false)) {
      f.debug_file = dir + rel;
      return true;
    }
    if (f.root &&
        try_debug_file(f, open_in_root(f.root->get(), dir + rel, pol.theirs),
                       false))
      return true;
  }
  return false;
}

// 2. By .gnu_debuglink: beside the file, in .debug/, under the debug roots;
// the CRC must match.
bool Symbolizer::debug_by_link(FileEntry &f, const DebugPolicies &pol) {
  const std::string &link = f.elf->debuglink();
  if (link.empty() || link.find('/') != std::string::npos || link == "." ||
      link == "..")
    return false;
  const std::string dir = dirname_of(f.mapping.real_path());
  std::string beside = dir;
  beside.append("/").append(link);
  if (f.root) {
    std::string in_debug = dir;
    in_debug.append("/.debug/").append(link);
    for (const std::string *path : {&beside, &in_debug})
      if (try_debug_file(f, open_in_root(f.root->get(), *path, pol.theirs),
                         true))
        return true;
  }
  for (const std::string &d : debug_dirs_) {
    UniqueFd dir_fd = open_root_dir(d);
    if (dir_fd &&
        try_debug_file(f, open_in_root(dir_fd.get(), beside, pol.ours), true))
      return true;
  }
  return false;
}

// 3. MiniDebugInfo: an xz-compressed ELF with function symbols inside the
// file itself (.gnu_debugdata).
void Symbolizer::debug_from_minidebuginfo(ElfFile &file) {
  if (file.minidebuginfo().empty())
    return;
  if (past_deadline()) {
    stats_.files_unread_at_end++;
    return;
  }
  std::string image =
      xz_decompress(file.minidebuginfo(), kMaxMiniDebugInfoImage);
  if (image.empty())
    return;
  auto mini = read_elf_image(std::move(image));
  if (mini && mini->has_symtab()) {
    stats_.elf_files_parsed++;
    file.adopt_symbols(std::move(*mini));
  }
}

void Symbolizer::find_debug_file(FileEntry &f) {
  if (past_deadline()) {
    if (f.elf->symbol_loss() != SymbolLoss::Time) // else counted already
      stats_.files_unread_at_end++;
    return;
  }
  const DebugPolicies policies(f);
  if (!debug_by_build_id(f, policies) && !debug_by_link(f, policies) &&
      !crc_stopped_ && !debug_from_debuginfod(f))
    debug_from_minidebuginfo(*f.elf);
}

// 4. From a debuginfod server, into root's cache: a file of root's, held
// to the same size and build id checks as one of /usr/lib/debug.
bool Symbolizer::debug_from_debuginfod(FileEntry &f) {
  if (!debuginfod_ || !debuginfod_->enabled() || f.elf->build_id().empty())
    return false;
  if (in_window_) {
    debuginfod_deferred_ = true; // fetched when its frames are named
    return true;
  }
  UniqueFd fd = debuginfod_->fetch(f.elf->build_id(), deadline_ns_);
  if (!fd)
    return false;
  CheckedFile c;
  if (fstat(fd.get(), &c.st) != 0 || !S_ISREG(c.st.st_mode))
    return false;
  if (static_cast<uint64_t>(c.st.st_size) > max_debug_file_bytes(f.size)) {
    stats_.debug_files_skipped++;
    return false;
  }
  c.fd = std::move(fd);
  return adopt_debug(f, std::move(c), false);
}

// ---- naming ----

void Symbolizer::settle_dwarf() {
  for (auto &[key, f] : files_by_key_)
    if (f->dwarf_ticket && !f->warm_offsets.empty())
      dwarf_for(*f);
}

void Symbolizer::end_naming() {
  dwarf_loader_.stop();
  // The loader has stopped: no one else holds the files. Their symbol
  // tables, the kernel's and the names demangled were 10-20 MiB of a
  // whole-system run's heap at the output (issue #27).
  to_parse_.clear();
  unparsed_.clear();
  waiting_ = 0;
  idle_dwarf_.clear();
  idle_dwarf_count_ = 0;
  forced_.clear();
  forced_count_ = 0;
  files_by_key_.clear();
  file_of_mapping_.clear();
  vdso_by_content_.clear();
  demangled_.clear();
  kernel_ = KernelSymbols{};
  processes_.clear();
}

const std::vector<Mapping> &Symbolizer::maps_of(uint32_t tgid) {
  static const std::vector<Mapping> none;
  Process &p = process(tgid);
  if (p.selected < p.readings.size())
    return p.readings[p.selected];
  return p.readings.empty() ? none : p.readings.back();
}

FrameKey Symbolizer::select_stack(uint32_t tgid, uint64_t stack_id) {
  Process &p = process(tgid);
  const Process::StackReading *r = p.stack_reading.find(stack_id);
  p.selected = r ? r->reading : SIZE_MAX;
  p.selected_newer = r && r->newer;
  uint32_t reading = UINT32_MAX;
  if (p.selected < p.readings.size())
    reading = static_cast<uint32_t>(p.selected);
  else if (!p.readings.empty())
    reading = static_cast<uint32_t>(p.readings.size() - 1);
  return {tgid, reading, 0, false, p.selected_newer};
}

void Symbolizer::expect_user_stack(uint32_t tgid, uint64_t stack_id,
                                   const std::vector<uint64_t> &ips) {
  (void)stack_id;
  Process &p = process(tgid);
  if (!p.perf_map)
    return;
  // Every frame, JIT code or not: sorting a few extra addresses costs less
  // than finding out which mappings a JIT uses.
  for (size_t i = 0; i < ips.size(); i++)
    p.perf_wanted.push_back(i > 0 && ips[i] ? ips[i] - 1 : ips[i]);
}

// The perf map's name for an address of anonymous memory. The map is
// scanned once, for every address expected so far; an address nobody
// announced makes it scanned again.
const std::string *Symbolizer::perf_map_name(Process &p, uint64_t addr) {
  if (!p.perf_map)
    return nullptr;
  if (!std::binary_search(p.perf_wanted.begin(), p.perf_wanted.end(), addr)) {
    p.perf_wanted.push_back(addr);
    p.perf_names.reset();
  }
  if (!p.perf_names) {
    std::sort(p.perf_wanted.begin(), p.perf_wanted.end());
    p.perf_wanted.erase(std::unique(p.perf_wanted.begin(), p.perf_wanted.end()),
                        p.perf_wanted.end());
    PerfMapScan scan =
        scan_perf_map(p.perf_map.get(), p.perf_wanted, kMaxPerfMapBytes);
    if (scan.truncated)
      stats_.perf_maps_truncated++;
    p.perf_names = std::move(scan.names);
  }
  auto it = p.perf_names->find(addr);
  return it == p.perf_names->end() ? nullptr : &it->second;
}

// The kernel's own vDSO image: ours, which nobody else can write.
const std::string *Symbolizer::kernel_vdso() {
  if (!kernel_vdso_read_) {
    kernel_vdso_read_ = true;
    uint64_t base = getauxval(AT_SYSINFO_EHDR);
    auto maps = files_.read("/proc/self/maps", kMaxMapsBytes);
    std::vector<Mapping> own;
    if (base && maps)
      own = parse_proc_maps(*maps);
    const Mapping *m = find_mapping(own, base);
    if (m && m->path == "[vdso]" && m->start == base &&
        m->end - m->start <= kMaxVdsoBytes)
      kernel_vdso_.emplace(reinterpret_cast<const char *>(base),
                           m->end - m->start);
  }
  return kernel_vdso_ ? &*kernel_vdso_ : nullptr;
}

// The process's own [vdso] image (root only: the kernel builds it, there
// is no file), as read while it lived, or now. Named by its content: the
// kernel's image if it is that (the usual case, parsed once), else its
// own, which can only ever name this process's frames and those of
// processes that hold the very same bytes.
ElfFile *Symbolizer::vdso_for(uint32_t tgid, const Mapping &m) {
  Process &p = process(tgid);
  if (p.vdso_resolved)
    return p.vdso;
  uint64_t size = m.end - m.start;
  if (size == 0 || size > kMaxVdsoBytes)
    return nullptr;
  if (!p.vdso_image)
    p.vdso_image = files_.read_at(
        proc_root_ + "/" + std::to_string(tgid) + "/mem", m.start, size);
  if (!p.vdso_image)
    return nullptr; // gone before it was read: unnamed, never guessed
  p.vdso_resolved = true;
  auto it = vdso_by_content_.find(*p.vdso_image);
  if (it == vdso_by_content_.end()) {
    const std::string *kernel = kernel_vdso();
    bool own = kernel && *kernel == *p.vdso_image;
    if (!own && vdso_by_content_.size() >= kMaxVdsoImages) {
      stats_.vdso_images_skipped++;
      p.vdso_image.reset();
      return nullptr;
    }
    std::unique_ptr<ElfFile> elf = read_elf_image(*p.vdso_image);
    if (elf)
      stats_.elf_files_parsed++;
    it = vdso_by_content_.emplace(*p.vdso_image, std::move(elf)).first;
  }
  p.vdso_image.reset(); // the map holds the bytes
  p.vdso = it->second.get();
  return p.vdso;
}

Symbolizer::FileEntry *Symbolizer::file_for(const Mapping &m) {
  // Asked for each frame of each stack noted and named: by the mapping's
  // address first (a process's readings live as long as it does here).
  auto known = file_of_mapping_.find(&m);
  if (known != file_of_mapping_.end())
    return known->second;
  FileKey key{m.dev_major, m.dev_minor, m.inode, m.inode ? "" : m.path};
  auto it = files_by_key_.find(key);
  if (it == files_by_key_.end())
    return nullptr; // captured later, maybe: not remembered
  return file_of_mapping_.emplace(&m, it->second.get()).first->second;
}

ElfFile *Symbolizer::elf_for(uint32_t tgid, const Mapping &m) {
  FileEntry *f = file_for(m);
  if (!f) {
    // A reading whose files were not captured (maps read late): open now.
    Process &p = process(tgid);
    if (!p.readings.empty()) {
      capture_files(tgid, p);
      f = file_for(m);
    }
  }
  if (!f)
    return nullptr;
  if (f->let_go)
    parse_let_go(*f, tgid, m); // its process may still be there
  else
    parse(*f);
  return f->elf.get();
}

// A name from the process's perf map (JIT code), counted; null if none.
const std::string *Symbolizer::jit_name(Process &p, uint64_t lookup,
                                        const ModuleInfo **where) {
  const std::string *name = perf_map_name(p, lookup);
  if (name) {
    stats_.named++;
    *where = module_info("[perf-map]", "");
  }
  return name;
}

// The function holding `lookup` in a file mapped as `m`, if any.
std::optional<std::string> Symbolizer::symbol_at(const ElfFile &elf,
                                                 const Mapping &m,
                                                 uint64_t lookup,
                                                 bool demangled) {
  auto vaddr = elf.file_offset_to_vaddr(lookup - m.start + m.offset);
  const ElfSymbol *sym = vaddr ? elf.find(*vaddr) : nullptr;
  if (!sym)
    return std::nullopt;
  stats_.named++;
  std::string name(sym->name);
  if (!demangled)
    return name;
  auto d = demangled_.find(name);
  if (d == demangled_.end())
    d = demangled_.emplace(name, demangle(name)).first;
  return d->second;
}

std::string Symbolizer::gone_frame(Process &p) {
  if (!p.gone) {
    p.gone = true;
    stats_.processes_gone++;
  }
  stats_.frames_process_gone++;
  return unnamed("[unknown]", true);
}

std::string Symbolizer::unnamed(const std::string &label, bool exited) {
  stats_.unnamed++;
  auto it =
      stats_.unnamed_by_module.try_emplace(exited ? "[exited]" : label).first;
  it->second++;
  last_unnamed_ = &it->second;
  return exited ? "[unknown]" : label;
}

void Symbolizer::count_again(const FrameCounts &c) {
  stats_.named += c.named;
  stats_.frames_process_gone += c.gone;
  stats_.frames_inlined += c.inlined;
  if (c.unnamed && c.unnamed_count) {
    stats_.unnamed += c.unnamed;
    *c.unnamed_count += c.unnamed; // a node of the map: stays where it is
  }
}

std::string Symbolizer::user_frame(uint32_t tgid, uint64_t addr,
                                   bool is_return_address,
                                   const ModuleInfo **module, Mapping *mapping,
                                   FrameCounts *counts) {
  uint64_t lookup = is_return_address && addr > 0 ? addr - 1 : addr;
  const ModuleInfo *where = nullptr;
  const uint64_t named = stats_.named, unnamed_before = stats_.unnamed,
                 gone = stats_.frames_process_gone;
  std::string name = symbolize_user_
                         ? name_user_address(tgid, lookup, &where)
                         : raw_user_address(tgid, addr, lookup, &where);
  if (counts) {
    counts->named = static_cast<uint32_t>(stats_.named - named);
    counts->unnamed = static_cast<uint32_t>(stats_.unnamed - unnamed_before);
    counts->gone = static_cast<uint32_t>(stats_.frames_process_gone - gone);
    counts->unnamed_count = counts->unnamed ? last_unnamed_ : nullptr;
  }
  if (module)
    *module = where;
  if (mapping) {
    const Mapping *m = find_mapping(maps_of(tgid), lookup);
    *mapping = m ? *m : Mapping{};
  }
  return name;
}

// A frame in a file as "file+0xOFFSET" (the address as the stack holds
// it, file-relative); code outside files is named as usual: no server
// could read it later.
namespace {

// Where an unnamed futex word lies: " in libfoo.so", " heap", " stack"...
std::string futex_place(const Mapping *m) {
  if (!m)
    return "";
  if (m->is_file())
    return " in " + m->display_name();
  if (m->path.size() > 2 && m->path.front() == '[' && m->path.back() == ']')
    return " " + m->path.substr(1, m->path.size() - 2);
  return m->path.empty() ? " anon" : " " + m->path;
}

} // namespace

std::string Symbolizer::user_data(uint32_t tgid, uint64_t stack_id,
                                  uint64_t addr) {
  select_stack(tgid, stack_id);
  const std::vector<Mapping> &maps = maps_of(tgid);
  const Mapping *m = find_mapping(maps, addr);
  // Zero-filled memory right after a file's last mapping is its .bss.
  const Mapping *file = m;
  if (m && !m->is_file() && m->path.empty() && m > maps.data() &&
      (m - 1)->end == m->start && (m - 1)->is_file())
    file = m - 1;
  if (file && file->is_file())
    if (ElfFile *elf = elf_for(tgid, *file)) {
      auto bias =
          elf->load_bias(file->start, file->offset, file->end - file->start);
      const ElfSymbol *sym = bias ? elf->find_data(addr - *bias) : nullptr;
      if (sym) {
        std::string name(sym->name);
        if (uint64_t off = addr - *bias - sym->addr) {
          char buf[32];
          snprintf(buf, sizeof(buf), "+0x%" PRIx64, off);
          name += buf;
        }
        return name;
      }
    }
  char buf[48];
  snprintf(buf, sizeof(buf), "[futex 0x%" PRIx64, addr);
  return buf + futex_place(file && file->is_file() ? file : m) + "]";
}

std::string Symbolizer::raw_user_address(uint32_t tgid, uint64_t addr,
                                         uint64_t lookup,
                                         const ModuleInfo **where) {
  const Mapping *m = find_mapping(maps_of(tgid), lookup);
  if (!m || !m->is_file())
    return name_user_address(tgid, lookup, where);
  ElfFile *elf = elf_for(tgid, *m);
  const std::string path = shown_path(process(tgid).exec, *m);
  const FileEntry *f = file_for(*m);
  *where =
      module_info(path, elf ? elf->build_id() : "", f ? f->debug_file : "");
  char offset[32];
  snprintf(offset, sizeof(offset), "+0x%" PRIx64, addr - m->start + m->offset);
  return basename_of(path) + offset;
}

void Symbolizer::set_source_options(SourceOptions o) {
  source_ = o;
  DwarfLimits limits;
  limits.lines = o.files;
  dwarf_loader_.set_limits(limits);
}

void Symbolizer::hold_idle_dwarf(FileEntry &f) {
  if (!f.dwarf_idle) {
    f.dwarf_idle = true;
    idle_dwarf_count_++;
    idle_dwarf_.push_back(&f);
  }
  keep_at_most(idle_dwarf_, idle_dwarf_count_, kMaxIdleDwarf,
               &FileEntry::dwarf_idle, [](FileEntry &oldest) {
                 oldest.dwarf_fd.reset();
                 oldest.dwarf_let_go = true;
               });
}

void Symbolizer::count_dwarf_let_go(FileEntry &f) {
  if (f.dwarf_let_go) {
    f.dwarf_let_go = false; // once per file
    stats_.dwarf_losses[static_cast<size_t>(DwarfLoss::Descriptors)]++;
  }
}

void Symbolizer::submit_dwarf(FileEntry &f) {
  if (f.dwarf_idle) {
    f.dwarf_idle = false; // its entry in idle_dwarf_ is skipped
    idle_dwarf_count_--;
  }
  if (dwarf_files_ >= kMaxDwarfFiles) {
    f.dwarf_fd.reset();
    stats_.dwarf_losses[static_cast<size_t>(DwarfLoss::Descriptors)]++;
    return;
  }
  dwarf_files_++;
  f.dwarf_ticket = dwarf_loader_.submit(std::move(f.dwarf_fd));
  for (uint64_t offset : f.warm_offsets)
    if (auto vaddr = f.elf->file_offset_to_vaddr(offset))
      dwarf_loader_.warm(f.dwarf_ticket, *vaddr);
}

DwarfFile *Symbolizer::dwarf_for(FileEntry &f) {
  count_dwarf_let_go(f);
  if (!f.dwarf && !f.dwarf_ticket && f.dwarf_fd && f.elf)
    submit_dwarf(f); // a frame no stack noted in the window
  if (f.dwarf || !f.dwarf_ticket)
    return f.dwarf.get();
  const uint64_t ahead = dwarf_loader_.read_ahead();
  DwarfLoss why = DwarfLoss::None;
  f.dwarf =
      dwarf_loader_.take(std::exchange(f.dwarf_ticket, 0), deadline_ns_, &why);
  if (why != DwarfLoss::None)
    stats_.dwarf_losses[static_cast<size_t>(why)]++;
  if (f.dwarf) {
    stats_.dwarf_files++;
    if (f.dwarf->loss() == DwarfLoss::Time) // its time spent warming
      stats_.dwarf_losses[static_cast<size_t>(DwarfLoss::Time)]++;
    stats_.dwarf_read_ahead += dwarf_loader_.read_ahead() - ahead;
    finish_warming(f);
    stats_.dwarf_reopens += f.dwarf->reopens(); // by the loader's thread
  }
  return f.dwarf.get();
}

// The addresses of the file's stacks the loader left (it reads a file let
// go again only for many of them): looked up now, in one reading, and its
// sections freed again. Naming then finds them cached, and the end of the
// run holds one file's sections at a time, not every file its samples
// touch (their peaks coincide with the profile's).
void Symbolizer::finish_warming(FileEntry &f) {
  if (!f.elf)
    return;
  for (uint64_t offset : f.warm_offsets)
    if (auto vaddr = f.elf->file_offset_to_vaddr(offset))
      f.dwarf->frames_at(*vaddr, deadline_ns_);
  f.dwarf->release();
}

const std::vector<SourceFrame> &Symbolizer::user_source(uint32_t tgid,
                                                        uint64_t addr,
                                                        bool is_return_address,
                                                        FrameCounts *counts) {
  static const std::vector<SourceFrame> none;
  if (!source_.dwarf || !symbolize_user_)
    return none;
  uint64_t lookup = is_return_address && addr > 0 ? addr - 1 : addr;
  Process &p = process(tgid);
  if (p.readings.empty())
    return none;
  const Mapping *m = find_mapping(maps_of(tgid), lookup);
  if (!m || !m->is_file())
    return none;
  ElfFile *elf = elf_for(tgid, *m);
  FileEntry *f = file_for(*m);
  if (!elf || !f)
    return none;
  DwarfFile *dwarf = dwarf_for(*f);
  if (!dwarf)
    return none;
  auto vaddr = elf->file_offset_to_vaddr(lookup - m->start + m->offset);
  if (!vaddr)
    return none;
  const bool had_time = dwarf->loss() != DwarfLoss::Time;
  const uint64_t reopens = dwarf->reopens();
  const std::vector<SourceFrame> &chain =
      dwarf->frames_at(*vaddr, deadline_ns_);
  stats_.dwarf_reopens += dwarf->reopens() - reopens;
  if (had_time && dwarf->loss() == DwarfLoss::Time)
    stats_.dwarf_losses[static_cast<size_t>(DwarfLoss::Time)]++;
  if (source_.inlined && chain.size() > 1) {
    stats_.frames_inlined += chain.size() - 1;
    if (counts)
      counts->inlined = static_cast<uint32_t>(chain.size() - 1);
  }
  return chain;
}

// In order: the process gone before its maps were read; JIT code outside
// files; the vDSO; a symbol of the mapped file; JIT code in a memfd; the
// mapping's own label ([module], [anon], [heap]...).
std::string Symbolizer::name_user_address(uint32_t tgid, uint64_t lookup,
                                          const ModuleInfo **where) {
  Process &p = process(tgid);
  if (p.readings.empty())
    return gone_frame(p);
  const Mapping *m = find_mapping(maps_of(tgid), lookup);
  const bool file = m && m->is_file();
  if (!file)
    if (const std::string *jit = jit_name(p, lookup, where))
      return *jit;
  // Code where the reading, older than the stack, has none (see
  // StackReading::newer): the process was gone before a newer one.
  if (p.selected_newer && (!m || !m->executable))
    return gone_frame(p);
  if (!m)
    return unnamed("[unknown]", false);
  if (m->path == "[vdso]") {
    if (ElfFile *vdso = vdso_for(tgid, *m)) {
      *where = module_info("[vdso]", vdso->build_id());
      if (auto name = symbol_at(*vdso, *m, lookup, false))
        return *name;
    }
  }
  const std::string path = shown_path(p.exec, *m);
  if (file) {
    ElfFile *elf = elf_for(tgid, *m);
    const FileEntry *f = file_for(*m);
    *where =
        module_info(path, elf ? elf->build_id() : "", f ? f->debug_file : "");
    if (elf)
      if (auto name = symbol_at(*elf, *m, lookup, true))
        return *name;
    if (const std::string *jit = jit_name(p, lookup, where))
      return *jit;
  }
  std::string label =
      m->path.empty() ? "[anon]" : "[" + basename_of(path) + "]";
  if (m->path.size() > 1 && m->path[0] == '[')
    label = m->path;
  if (!*where)
    *where = module_info(m->path.empty() ? "[anon]" : m->path, "");
  return unnamed(label, false);
}

namespace {
// "1 s", "0.5 s".
std::string seconds(uint64_t ns) {
  char text[32];
  snprintf(text, sizeof(text), "%g s", static_cast<double>(ns) / 1e9);
  return text;
}
} // namespace

void Symbolizer::set_deadline(uint64_t deadline_ns, uint64_t allowed_ns) {
  deadline_ns_ = deadline_ns;
  name_time_ns_ = allowed_ns;
  dwarf_loader_.set_deadline(deadline_ns);
}

namespace {

// The line on DWARF not read, by cause (empty if none); without -v, not
// for want of time alone (see describe_losses).
std::string dwarf_losses_text(const SymbolizeStats &stats, bool verbose) {
  static const char *const kDwarfCause[] = {
      "",
      "DWARF sections over 512 MiB",
      "the run's share spent (1 GiB of DWARF)",
      "dwz or split DWARF (libdw would open other files by path)",
      "malformed",
      "over 1 s of reading, or the end of the run (--name-time SECONDS "
      "gives more)",
      "more files with DWARF than offcpu keeps open (256 read in a run, 128 "
      "waiting for a stack)",
  };
  static_assert(std::size(kDwarfCause) ==
                static_cast<size_t>(DwarfLoss::Count));
  std::string dwarf_causes;
  uint64_t dwarf_lost = 0;
  for (size_t why = 1; why < stats.dwarf_losses.size(); why++)
    if (uint64_t n = stats.dwarf_losses[why];
        n && (verbose || why != static_cast<size_t>(DwarfLoss::Time))) {
      dwarf_lost += n;
      dwarf_causes += (dwarf_causes.empty() ? "" : ", ") + std::to_string(n) +
                      " " + kDwarfCause[why];
    }
  if (!dwarf_lost)
    return {};
  return "DWARF of " + std::to_string(dwarf_lost) +
         " files not read or read in part (" + dwarf_causes +
         "); their frames lack inlined functions and source lines";
}

} // namespace

std::string Symbolizer::describe_losses(bool verbose) const {
  std::string out;
  auto line = [&](const std::string &text) {
    out += "offcpu: warning: " + text + "\n";
  };
  if (stats_.frames_process_gone)
    line(std::to_string(stats_.frames_process_gone) + " user frames of " +
         std::to_string(stats_.processes_gone) +
         " processes unnamed ([unknown]): they exited before their memory "
         "maps could be read");
  for (size_t k = 0; k < stats_.refused.size(); k++) {
    std::string causes;
    uint64_t total = 0;
    for (size_t why = 0; why < kOpenFailures; why++) {
      uint64_t n = stats_.refused[k][why];
      if (!n)
        continue;
      total += n;
      causes += (causes.empty() ? "" : ", ") + std::to_string(n) + " " +
                open_failure_name(static_cast<OpenFailure>(why));
    }
    if (total)
      line(std::to_string(total) + " " +
           file_kind_name(static_cast<FileKind>(k)) +
           " of traced processes not read (" + causes +
           "); frames they would name show as [module] or [anon]");
  }
  if (stats_.debug_files_skipped)
    line(std::to_string(stats_.debug_files_skipped) +
         " debug files skipped: implausibly large for their binary (" +
         debug_file_size_rule() + "), or their CRC took over " +
         seconds(kCrcNsPerFile) + " (" + seconds(kCrcNsPerRun) +
         " for all of a run's)");
  if (stats_.files_unread_at_end)
    line(std::to_string(stats_.files_unread_at_end) +
         " files not read or read in part: the end of the run allows " +
         seconds(name_time_ns_) +
         " for naming after the window (--name-time SECONDS; or record with "
         "--no-symbolize -o FILE.pb.gz and name later with pprof); frames "
         "they would name show as [module]");
  if (stats_.files_let_go)
    line(std::to_string(stats_.files_let_go) +
         " mapped files of traced processes let go unread: more files waited "
         "to be read than offcpu keeps open (" +
         std::to_string(kMaxUnparsedOpen + kMaxForcedOpen) +
         "); frames they would name show as [module]");
  if (stats_.debug_files_untrusted)
    line(std::to_string(stats_.debug_files_untrusted) +
         " debug files not used: owned by neither root nor the owner of "
         "their binary, so not trusted to name it");
  static const char *const kLossCause[] = {
      "",
      "a symbol table over 128 MiB",
      "over 2M function symbols",
      "over 128 MiB of symbol names",
      "over 0.5 s of reading",
      "the run's share spent (4M symbols, 256 MiB of names)",
  };
  static_assert(std::size(kLossCause) ==
                static_cast<size_t>(SymbolLoss::Count));
  std::string causes;
  uint64_t cut = 0;
  for (size_t why = 1; why < stats_.symbol_losses.size(); why++)
    if (uint64_t n = stats_.symbol_losses[why]) {
      cut += n;
      causes += (causes.empty() ? "" : ", ") + std::to_string(n) + " " +
                kLossCause[why];
    }
  if (cut)
    line("symbols of " + std::to_string(cut) +
         " files read in part, past a budget per file (" + causes +
         "); frames they would name show as [module]");
  if (std::string dwarf = dwarf_losses_text(stats_, verbose); !dwarf.empty())
    line(dwarf);
  if (debuginfod_)
    out += debuginfod_->describe_losses();
  if (stats_.vdso_images_skipped)
    line(std::to_string(stats_.vdso_images_skipped) +
         " rewritten vDSO images not read (over 16 distinct images); their "
         "frames show as [vdso]");
  if (stats_.perf_maps_truncated)
    line(std::to_string(stats_.perf_maps_truncated) +
         " perf maps over 256 MiB read in part");
  return out;
}

} // namespace offcpu
