// Turns instruction pointers into frame names: kernel addresses through
// kallsyms, user addresses through the process's mappings and ELF symbols
// (with separate debug files when the binary is stripped).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "symbolize/elf_file.h"
#include "symbolize/kallsyms.h"
#include "symbolize/perf_map.h"
#include "symbolize/proc_maps.h"
#include "util/fs.h"

namespace offcpu {

struct SymbolizeStats {
  uint64_t named = 0;
  uint64_t unnamed = 0;
  std::map<std::string, uint64_t> unnamed_by_module;
  uint64_t elf_files_parsed = 0;
};

// The file (or kernel part) a frame's code came from; owned by Symbolizer.
struct ModuleInfo {
  std::string path; // "/usr/lib/.../libc.so.6", "[kernel.kallsyms]", "[nfs]"
  std::string build_id; // lowercase hex, may be empty
};

class Symbolizer {
public:
  // `proc_root` is "/proc" except in tests.
  Symbolizer(const FileReader &files, KernelSymbols kernel,
             std::string proc_root = "/proc");

  // `addr` is the frame's address as stored; return addresses (all frames
  // but the first) are looked up one byte earlier, inside the call.
  // `module`, if given, receives where the frame's code lives (or null).
  std::string kernel_frame(uint64_t addr, bool is_return_address,
                           const ModuleInfo **module = nullptr);
  std::string user_frame(uint32_t tgid, uint64_t addr, bool is_return_address,
                         const ModuleInfo **module = nullptr);

  // A user stack the process is blocked on right now: unless the maps read
  // so far cover every frame, reads them again (the process may have
  // exec'd or mapped a library since), opens the files they name, and ties
  // the stack to that reading.
  void note_user_stack(uint32_t tgid, uint64_t stack_id,
                       const std::vector<uint64_t> &ips);
  // Frames named next belong to this stack: use the maps it was taken under.
  void select_stack(uint32_t tgid, uint64_t stack_id);

  void set_kernel_symbols(KernelSymbols ks) { kernel_ = std::move(ks); }
  // Roots of separate debug files (.build-id/xx/rest.debug and debuglink
  // names); default /usr/lib/debug.
  void add_debug_dirs(const std::vector<std::string> &dirs) {
    debug_dirs_.insert(debug_dirs_.begin(), dirs.begin(), dirs.end());
  }

  const KernelSymbols &kernel_symbols() const { return kernel_; }
  const SymbolizeStats &stats() const { return stats_; }

private:
  struct Process {
    std::vector<std::vector<Mapping>> readings; // oldest first
    std::unordered_map<uint64_t, size_t> stack_reading;
    size_t selected = SIZE_MAX; // reading for the stack being named
    std::vector<PerfMapSymbol> perf_map;
    bool perf_map_read = false;
  };
  const std::vector<PerfMapSymbol> &perf_map_of(uint32_t tgid, Process &p);
  const std::vector<Mapping> &maps_of(uint32_t tgid);
  bool read_maps(uint32_t tgid, Process &p);
  using FileKey = std::tuple<uint32_t, uint32_t, uint64_t, std::string>;

  Process &process(uint32_t tgid);
  ElfFile *elf_for(uint32_t tgid, const Mapping &m);
  ElfFile *vdso_for(uint32_t tgid, const Mapping &m);
  const ModuleInfo *module_info(const std::string &path,
                                const std::string &build_id);
  void find_debug_file(ElfFile &file, uint32_t tgid, const Mapping &m);

  const FileReader &files_;
  KernelSymbols kernel_;
  std::string proc_root_;
  std::unordered_map<uint32_t, Process> processes_;
  std::map<FileKey, std::unique_ptr<ElfFile>> elf_cache_;
  std::unordered_map<std::string, std::string> demangled_;
  std::map<std::string, std::unique_ptr<ModuleInfo>> modules_;
  std::vector<std::string> debug_dirs_{"/usr/lib/debug"};
  // vDSO images by size: one per kernel ABI (64-bit, 32-bit compat...).
  std::map<uint64_t, std::unique_ptr<ElfFile>> vdso_cache_;
  SymbolizeStats stats_;
};

} // namespace offcpu
