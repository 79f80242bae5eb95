#include "symbolize/symbolizer.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "symbolize/demangle.h"
#include "symbolize/xz.h"

namespace offcpu {
namespace {

constexpr std::size_t kMaxMapsBytes = 64u << 20;
constexpr std::size_t kMaxPerfMapBytes = 256u << 20;

// The process's PID in its own PID namespace (the number a JIT running in a
// container puts in its perf map's name): last field of NSpid.
std::string namespace_pid(const FileReader &files, const std::string &pid_dir,
                          uint32_t tgid) {
  auto status = files.read(pid_dir + "/status", 1u << 16);
  if (status) {
    size_t at = status->find("\nNSpid:");
    if (at != std::string::npos) {
      size_t end = status->find('\n', at + 1);
      std::string line =
          status->substr(at + 7, end == std::string::npos ? end : end - at - 7);
      size_t last = line.find_last_of(" \t");
      std::string ns = line.substr(last == std::string::npos ? 0 : last + 1);
      if (!ns.empty() &&
          ns.find_first_not_of("0123456789") == std::string::npos)
        return ns;
    }
  }
  return std::to_string(tgid);
}

bool readable(const std::string &path) {
  return access(path.c_str(), R_OK) == 0;
}

std::string dirname_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

} // namespace

Symbolizer::Symbolizer(const FileReader &files, KernelSymbols kernel,
                       std::string proc_root)
    : files_(files), kernel_(std::move(kernel)),
      proc_root_(std::move(proc_root)) {}

const ModuleInfo *Symbolizer::module_info(const std::string &path,
                                          const std::string &build_id) {
  auto &slot = modules_[path];
  if (!slot)
    slot = std::make_unique<ModuleInfo>(ModuleInfo{path, build_id});
  return slot.get();
}

std::string Symbolizer::kernel_frame(uint64_t addr, bool is_return_address,
                                     const ModuleInfo **module) {
  uint64_t lookup = is_return_address && addr > 0 ? addr - 1 : addr;
  auto sym = kernel_.find(lookup);
  if (module)
    *module = module_info(sym && !sym->module.empty()
                              ? "[" + std::string(sym->module) + "]"
                              : "[kernel.kallsyms]",
                          "");
  if (!sym) {
    stats_.unnamed++;
    stats_.unnamed_by_module["[kernel]"]++;
    return "[unknown]";
  }
  stats_.named++;
  std::string name(sym->name);
  if (!sym->module.empty())
    name.append(" [").append(sym->module).append("]");
  return name;
}

Symbolizer::Process &Symbolizer::process(uint32_t tgid) {
  auto it = processes_.find(tgid);
  if (it != processes_.end())
    return it->second;
  Process &p = processes_[tgid];
  read_maps(tgid, p);
  return p;
}

bool Symbolizer::read_maps(uint32_t tgid, Process &p) {
  auto text = files_.read(proc_root_ + "/" + std::to_string(tgid) + "/maps",
                          kMaxMapsBytes);
  if (!text || text->empty())
    return false;
  p.readings.push_back(parse_proc_maps(*text));
  // Open the files while the process exists: /proc/PID/map_files and
  // /proc/PID/root lead to them only as long as it does.
  for (const Mapping &m : p.readings.back())
    if (m.executable && m.is_file())
      elf_for(tgid, m);
  p.perf_map_read = false; // JITs append: read again with the new maps
  perf_map_of(tgid, p);
  return true;
}

const std::vector<PerfMapSymbol> &Symbolizer::perf_map_of(uint32_t tgid,
                                                          Process &p) {
  if (p.perf_map_read)
    return p.perf_map;
  p.perf_map_read = true;
  std::string pid_dir = proc_root_ + "/" + std::to_string(tgid);
  std::string name =
      "/tmp/perf-" + namespace_pid(files_, pid_dir, tgid) + ".map";
  // Through the process's root first: a JIT in a container writes its own /tmp.
  auto text = files_.read(pid_dir + "/root" + name, kMaxPerfMapBytes);
  if (!text)
    text = files_.read(name, kMaxPerfMapBytes);
  if (text) {
    auto fresh = parse_perf_map(*text);
    if (!fresh.empty() || p.perf_map.empty())
      p.perf_map = std::move(fresh);
  }
  return p.perf_map;
}

const std::vector<Mapping> &Symbolizer::maps_of(uint32_t tgid) {
  static const std::vector<Mapping> none;
  Process &p = process(tgid);
  if (p.selected < p.readings.size())
    return p.readings[p.selected];
  return p.readings.empty() ? none : p.readings.back();
}

void Symbolizer::note_user_stack(uint32_t tgid, uint64_t stack_id,
                                 const std::vector<uint64_t> &ips) {
  Process &p = processes_[tgid];
  auto covered = [&](const std::vector<Mapping> &maps) {
    for (size_t i = 0; i < ips.size(); i++)
      if (!find_mapping(maps, i > 0 && ips[i] ? ips[i] - 1 : ips[i]))
        return false;
    return true;
  };
  if (p.readings.empty() || !covered(p.readings.back()))
    if (!read_maps(tgid, p))
      return;
  p.stack_reading[stack_id] = p.readings.size() - 1;
}

void Symbolizer::select_stack(uint32_t tgid, uint64_t stack_id) {
  Process &p = process(tgid);
  auto it = p.stack_reading.find(stack_id);
  p.selected = it == p.stack_reading.end() ? SIZE_MAX : it->second;
}

void Symbolizer::find_debug_file(ElfFile &file, uint32_t tgid,
                                 const Mapping &m) {
  const std::string root = proc_root_ + "/" + std::to_string(tgid) + "/root";
  auto adopt = [&](std::unique_ptr<ElfFile> debug) {
    if (!debug || !debug->has_symtab())
      return false;
    stats_.elf_files_parsed++;
    file.adopt_symbols(std::move(*debug));
    return true;
  };
  // 1. By build id, in each debug root, ours and the process's.
  const std::string &id = file.build_id();
  if (id.size() > 2) {
    std::string rel =
        "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    for (const std::string &dir : debug_dirs_)
      for (const std::string &path : {dir + rel, root + dir + rel}) {
        if (!readable(path))
          continue;
        auto debug = ElfFile::open(path);
        if (debug && (debug->build_id().empty() || debug->build_id() == id) &&
            adopt(std::move(debug)))
          return;
      }
  }
  // 2. By .gnu_debuglink: beside the file, in .debug/, under the debug
  // roots; the CRC must match.
  if (!file.debuglink().empty() &&
      file.debuglink().find('/') == std::string::npos) {
    std::string dir =
        dirname_of(m.deleted() ? m.path.substr(0, m.path.size() - 10) : m.path);
    std::vector<std::string> paths;
    for (const std::string &base : {root + dir, dir}) {
      paths.push_back(base + "/" + file.debuglink());
      paths.push_back(base + "/.debug/" + file.debuglink());
    }
    for (const std::string &d : debug_dirs_)
      paths.push_back(d + dir + "/" + file.debuglink());
    for (const std::string &path : paths) {
      if (!readable(path))
        continue;
      auto crc = file_crc32(path);
      if (crc && *crc == file.debuglink_crc() && adopt(ElfFile::open(path)))
        return;
    }
  }
  // 3. MiniDebugInfo: an xz-compressed ELF with function symbols inside
  // the file itself (.gnu_debugdata).
  if (!file.minidebuginfo().empty()) {
    std::string elf = xz_decompress(file.minidebuginfo(), 256u << 20);
    if (!elf.empty())
      adopt(ElfFile::open_memory(std::move(elf)));
  }
}

// The process's own [vdso] image, read from its memory (root only): the
// kernel builds it, there is no file.
ElfFile *Symbolizer::vdso_for(uint32_t tgid, const Mapping &m) {
  uint64_t size = m.end - m.start;
  if (size == 0 || size > (1u << 20))
    return nullptr;
  auto it = vdso_cache_.find(size);
  if (it != vdso_cache_.end())
    return it->second.get();
  auto image = files_.read_at(proc_root_ + "/" + std::to_string(tgid) + "/mem",
                              m.start, size);
  std::unique_ptr<ElfFile> elf;
  if (image) {
    elf = ElfFile::open_memory(std::move(*image));
    if (elf)
      stats_.elf_files_parsed++;
  }
  return vdso_cache_.emplace(size, std::move(elf)).first->second.get();
}

ElfFile *Symbolizer::elf_for(uint32_t tgid, const Mapping &m) {
  FileKey key{m.dev_major, m.dev_minor, m.inode, m.inode ? "" : m.path};
  auto it = elf_cache_.find(key);
  if (it != elf_cache_.end())
    return it->second.get();

  // map_files reaches the very file that is mapped, even when it was deleted
  // or lives in another mount namespace; the path is the fallback.
  char range[64];
  snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, m.start, m.end);
  std::string pid_dir = proc_root_ + "/" + std::to_string(tgid);
  std::unique_ptr<ElfFile> file = ElfFile::open(pid_dir + "/map_files" + range);
  if (!file)
    file = ElfFile::open(pid_dir + "/root" + m.path);
  if (!file && !m.deleted())
    file = ElfFile::open(m.path);
  if (file) {
    stats_.elf_files_parsed++;
    if (!file->has_symtab())
      find_debug_file(*file, tgid, m);
  }
  return elf_cache_.emplace(key, std::move(file)).first->second.get();
}

std::string Symbolizer::user_frame(uint32_t tgid, uint64_t addr,
                                   bool is_return_address,
                                   const ModuleInfo **module) {
  uint64_t lookup = is_return_address && addr > 0 ? addr - 1 : addr;
  const Mapping *m = find_mapping(maps_of(tgid), lookup);
  if (module)
    *module = nullptr;
  if (!m || !m->is_file()) {
    // JIT code: anonymous memory named by the process's perf map.
    if (const PerfMapSymbol *js =
            find_perf_symbol(perf_map_of(tgid, process(tgid)), lookup)) {
      stats_.named++;
      if (module)
        *module = module_info("[perf-map]", "");
      return js->name;
    }
  }
  if (!m) {
    stats_.unnamed++;
    stats_.unnamed_by_module["[unknown]"]++;
    return "[unknown]";
  }
  if (m->path == "[vdso]") {
    if (ElfFile *vdso = vdso_for(tgid, *m)) {
      if (module)
        *module = module_info("[vdso]", vdso->build_id());
      auto vaddr = vdso->file_offset_to_vaddr(lookup - m->start + m->offset);
      if (const ElfSymbol *sym = vaddr ? vdso->find(*vaddr) : nullptr) {
        stats_.named++;
        return sym->name;
      }
    }
  }
  if (m->is_file()) {
    ElfFile *elf = elf_for(tgid, *m);
    if (module) {
      std::string path =
          m->deleted() ? m->path.substr(0, m->path.size() - 10) : m->path;
      *module = module_info(path, elf ? elf->build_id() : "");
    }
    if (elf) {
      auto vaddr = elf->file_offset_to_vaddr(lookup - m->start + m->offset);
      if (vaddr) {
        if (const ElfSymbol *sym = elf->find(*vaddr)) {
          stats_.named++;
          auto d = demangled_.find(sym->name);
          if (d == demangled_.end())
            d = demangled_.emplace(sym->name, demangle(sym->name)).first;
          return d->second;
        }
      }
    }
  }
  std::string label =
      m->path.empty() ? "[anon]" : "[" + m->display_name() + "]";
  if (m->path.size() > 1 && m->path[0] == '[')
    label = m->path;
  if (module && !*module)
    *module = module_info(m->path.empty() ? "[anon]" : m->path, "");
  stats_.unnamed++;
  stats_.unnamed_by_module[label]++;
  return label;
}

} // namespace offcpu
