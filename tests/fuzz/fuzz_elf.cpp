// libFuzzer target: the ELF symbol reader on arbitrary bytes (offcpu reads
// ELF files other users control), including its MiniDebugInfo path.
#include <cstddef>
#include <cstdint>
#include <string>

#include "symbolize/elf_file.h"
#include "symbolize/xz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto elf = offcpu::ElfFile::open_memory(
      std::string(reinterpret_cast<const char *>(data), size));
  if (!elf)
    return 0;
  for (uint64_t off :
       {uint64_t{0}, uint64_t{0x40}, uint64_t{0x1000}, uint64_t{size / 2}})
    if (auto v = elf->file_offset_to_vaddr(off))
      elf->find(*v);
  for (uint64_t a = 0; a < 0x4000; a += 0x101)
    elf->find(a);
  if (!elf->minidebuginfo().empty()) {
    std::string inner = offcpu::xz_decompress(elf->minidebuginfo(), 16u << 20);
    if (auto mini = offcpu::ElfFile::open_memory(std::move(inner)))
      elf->adopt_symbols(std::move(*mini));
  }
  (void)elf->build_id();
  (void)elf->debuglink();
  // Again within tight budgets, as if the run's share were nearly spent:
  // every way of cutting a table short.
  offcpu::SymbolLimits tight;
  tight.max_symbols = 64;
  tight.max_name_bytes = 2048;
  offcpu::SymbolRunBudget run;
  run.symbols_left = 48;
  run.name_bytes_left = 1024;
  auto cut = offcpu::ElfFile::open_memory(
      std::string(reinterpret_cast<const char *>(data), size), tight, &run);
  if (cut)
    for (uint64_t a = 0; a < 0x4000; a += 0x101)
      cut->find(a);
  return 0;
}
