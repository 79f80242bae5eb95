// Function symbols of one ELF file, read with libelf. Files are owned by
// other users: nothing read from them is trusted for sizes or offsets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace offcpu {

struct ElfSymbol {
  uint64_t addr = 0;
  uint64_t size = 0;
  // As in the file (mangled), held by the ElfFile: names are copied once per
  // string-table offset, however many symbols share one.
  std::string_view name;
};

// A symbol table or its string table larger than this is not read: libelf
// holds a section whole while it is read (2^22 entries fit well below).
constexpr uint64_t kMaxSymbolTableBytes = uint64_t{128} << 20;

// What reading one file's symbols may cost (issue #26). A symbol's name
// counts in full for each symbol that uses it: sorting and naming touch it
// that often, even when it is held once.
struct SymbolLimits {
  size_t max_symbols = size_t{1} << 21;          // function symbols kept
  uint64_t max_name_bytes = uint64_t{128} << 20; // sum of their names
  uint64_t max_ns = 500000000;                   // reading and sorting
  // Also the data objects (STT_OBJECT), within the same budgets: for
  // offcpu lock --futex, which names a futex word by its variable.
  bool data_symbols = false;
};

// The run's share, spent by every file read with it.
struct SymbolRunBudget {
  uint64_t symbols_left = uint64_t{1} << 22;
  uint64_t name_bytes_left = uint64_t{256} << 20; // names held
};

// Why a file's symbols were read in part (the rest unnamed) or not at all.
enum class SymbolLoss {
  None,
  TableTooLarge, // a symbol or string table over kMaxSymbolTableBytes
  Symbols,       // over SymbolLimits::max_symbols
  NameBytes,     // over SymbolLimits::max_name_bytes
  Time,          // over SymbolLimits::max_ns
  RunBudget,     // the run's share was spent by other files
  Count
};

class ElfFile {
public:
  // Null if the path cannot be opened or is not an ELF file. For trusted
  // paths (tests, tools); files of other users come through open_fd.
  static std::unique_ptr<ElfFile> open(const std::string &path);
  // An ELF file already opened (and checked: util/safe_file.h). Read with
  // pread only: the owner truncating it meanwhile cannot crash us.
  // `run`, if given, is charged for the symbols kept.
  static std::unique_ptr<ElfFile> open_fd(int fd,
                                          const SymbolLimits &limits = {},
                                          SymbolRunBudget *run = nullptr);
  // An ELF image in memory (MiniDebugInfo); the bytes are not kept.
  static std::unique_ptr<ElfFile> open_memory(std::string image,
                                              const SymbolLimits &limits = {},
                                              SymbolRunBudget *run = nullptr);

  // Virtual address (as the ELF file numbers them) for an offset into the
  // file, as /proc/PID/maps reports mappings; nullopt outside PT_LOAD.
  std::optional<uint64_t> file_offset_to_vaddr(uint64_t offset) const;

  // The function whose [addr, addr + size) holds vaddr. An address past the
  // end of the nearest symbol is in no symbol: it returns null rather than a
  // wrong neighbour.
  const ElfSymbol *find(uint64_t vaddr) const;

  // The data object (read with SymbolLimits::data_symbols) whose
  // [addr, addr + size) holds vaddr, or null.
  const ElfSymbol *find_data(uint64_t vaddr) const;
  // What to subtract from an address in a mapping of `size` bytes of this
  // file from `offset` at `start` (and in the zero-filled memory after it,
  // .bss) to get the virtual address; nullopt if it maps no PT_LOAD data.
  std::optional<uint64_t> load_bias(uint64_t start, uint64_t offset,
                                    uint64_t size) const;

  // Takes the symbols of a separate debug file for this one.
  void adopt_symbols(ElfFile &&debug);
  // Why symbols are missing, if a budget cut them.
  SymbolLoss symbol_loss() const { return loss_; }

  bool has_symtab() const { return has_symtab_; }
  // It holds DWARF (.debug_info): inlined functions and source lines.
  bool has_debug_info() const { return has_debug_info_; }
  std::size_t symbol_count() const { return symbols_.size(); }
  const std::vector<ElfSymbol> &symbols() const { return symbols_; }
  const std::string &build_id() const { return build_id_; } // lowercase hex
  const std::string &debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }
  // The raw .gnu_debugdata section (xz), empty if none.
  const std::string &minidebuginfo() const { return minidebuginfo_; }

private:
  struct Segment {
    uint64_t offset, vaddr, filesz;
  };
  void finish_symbols();
  // The helpers take libelf's Elf * and Elf_Scn * as void *, to keep
  // libelf's header out of this one.
  static std::unique_ptr<ElfFile> from_elf(void *elf, // not owned
                                           const SymbolLimits &limits,
                                           SymbolRunBudget *run);
  void read_symbols(void *elf, void *scn, const SymbolLimits &limits,
                    SymbolRunBudget *run, uint64_t start_ns, bool objects);
  void read_segments(void *elf);
  void read_named_section(void *scn, const char *name);
  void read_debuglink(const void *bytes, size_t size);

  std::vector<Segment> segments_;
  std::vector<ElfSymbol> symbols_;
  // The names symbols_ point into (a vector: moving it keeps the bytes in
  // place, as a short std::string would not).
  std::vector<char> names_;
  std::vector<ElfSymbol> data_symbols_; // SymbolLimits::data_symbols
  std::vector<char> data_names_;
  SymbolLoss loss_ = SymbolLoss::None;
  bool has_symtab_ = false;
  bool has_debug_info_ = false;
  std::string build_id_;
  std::string debuglink_;
  uint32_t debuglink_crc_ = 0;
  std::string minidebuginfo_;
};

} // namespace offcpu
