#include "symbolize/symbolizer.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "symbolize/demangle.h"

namespace offcpu {
namespace {

constexpr std::size_t kMaxMapsBytes = 64u << 20;
const char kDebugRoot[] = "/usr/lib/debug";

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
  return true;
}

const std::vector<Mapping> &Symbolizer::maps_of(uint32_t tgid) {
  static const std::vector<Mapping> none;
  Process &p = process(tgid);
  if (p.selected < p.readings.size())
    return p.readings[p.selected];
  return p.readings.empty() ? none : p.readings.back();
}

void Symbolizer::remember_process(uint32_t tgid) {
  process(tgid);
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
  std::vector<std::string> candidates;
  const std::string &id = file.build_id();
  if (id.size() > 2) {
    std::string rel =
        "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    candidates.push_back(kDebugRoot + rel);
    candidates.push_back(proc_root_ + "/" + std::to_string(tgid) + "/root" +
                         kDebugRoot + rel);
  }
  for (const std::string &path : candidates) {
    if (!readable(path))
      continue;
    auto debug = ElfFile::open(path);
    if (debug && debug->has_symtab() &&
        (debug->build_id().empty() || debug->build_id() == id)) {
      stats_.elf_files_parsed++;
      file.adopt_symbols(std::move(*debug));
      return;
    }
  }
  if (file.debuglink().empty() ||
      file.debuglink().find('/') != std::string::npos)
    return;
  std::string dir =
      dirname_of(m.deleted() ? m.path.substr(0, m.path.size() - 10) : m.path);
  std::string root = proc_root_ + "/" + std::to_string(tgid) + "/root";
  for (const std::string &base : {root + dir, dir}) {
    for (const std::string &path :
         {base + "/" + file.debuglink(), base + "/.debug/" + file.debuglink(),
          std::string(kDebugRoot) + dir + "/" + file.debuglink()}) {
      if (!readable(path))
        continue;
      auto crc = file_crc32(path);
      if (!crc || *crc != file.debuglink_crc())
        continue;
      auto debug = ElfFile::open(path);
      if (debug && debug->has_symtab()) {
        stats_.elf_files_parsed++;
        file.adopt_symbols(std::move(*debug));
        return;
      }
    }
  }
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
  if (!m) {
    stats_.unnamed++;
    stats_.unnamed_by_module["[unknown]"]++;
    return "[unknown]";
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
