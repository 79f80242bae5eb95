// What the unwinder needs from an ELF file: its loadable segments (to turn
// mapped addresses into file addresses), its CFI sections, its build id and
// debug link. Read with libelf over pread (never a mapping of a file a user
// controls), sections bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace offcpu::unwind {

struct ElfCfi {
  struct Segment {
    uint64_t offset, vaddr, filesz;
    bool exec;
  };
  std::vector<Segment> loads;
  std::string build_id; // lowercase hex
  std::string debuglink;
  uint32_t debuglink_crc = 0;
  std::string eh_frame; // bytes of .eh_frame, empty if none
  uint64_t eh_frame_vaddr = 0;
  std::string debug_frame;    // bytes of .debug_frame (decompressed)
  uint64_t eh_frame_size = 0; // from the section header, even if not read

  // Bytes of executable segments.
  uint64_t code_bytes() const;
  // The file address where a mapping at file offset `offset` starts.
  std::optional<uint64_t> vaddr_of_offset(uint64_t offset) const;
};

enum class CfiWant {
  Headers,  // segments, build id, sizes: for estimates
  EhFrame,  // and .eh_frame
  DebugFile // .debug_frame (a separate debug file)
};

std::optional<ElfCfi> read_elf_cfi(int fd, CfiWant want);
// An image in memory: the vDSO.
std::optional<ElfCfi> read_elf_cfi_memory(const std::string &image);

} // namespace offcpu::unwind
