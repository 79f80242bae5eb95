// libFuzzer target: DWARF through libdw (issue #31) on arbitrary bytes, as
// offcpu reads other users' .debug_info, .debug_line and .debug_abbrev:
// the unit index, then lookups over the units' addresses and around them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "symbolize/dwarf_lines.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  offcpu::DwarfLimits limits;
  limits.max_bytes = 4u << 20;
  limits.max_ns = 2000000000; // libFuzzer's -timeout catches a stall first
  limits.max_dies_per_lookup = 1u << 16;
  offcpu::DwarfRunBudget run;
  offcpu::DwarfLoss why = offcpu::DwarfLoss::None;
  auto file = offcpu::DwarfFile::open_memory(
      std::string(reinterpret_cast<const char *>(data), size), limits, &run,
      &why);
  if (!file)
    return 0;
  uint64_t sink = 0;
  auto use = [&](uint64_t addr) {
    for (const offcpu::SourceFrame &f : file->frames_at(addr)) {
      sink += f.line + f.start_line;
      if (f.function)
        sink += f.function->size();
      if (f.file)
        sink += f.file->size();
    }
  };
  for (uint64_t a = 0; a < 0x3000; a += 0x33)
    use(a);
  for (uint64_t a : {uint64_t{0x401000}, uint64_t{0x1139}, ~uint64_t{0}})
    use(a);
  return static_cast<int>(sink & 0);
}
