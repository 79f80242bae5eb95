// libelf glue shared by the ELF readers: the symbol reader
// (symbolize/elf_file.cpp) and the CFI reader (unwind/elf_cfi.cpp).
#pragma once

#include <libelf.h>

#include <cstdint>
#include <memory>
#include <string>

namespace offcpu {

// A note section larger than this is not read (real ones are bytes).
constexpr uint64_t kMaxElfNoteBytes = 1u << 20;

struct ElfDeleter {
  void operator()(Elf *e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfDeleter>;

// libelf's version handshake, done once.
bool libelf_ready();

// The GNU build id in note section `scn`, as lowercase hex; empty if none.
std::string gnu_build_id(Elf_Scn *scn);

} // namespace offcpu
