// libFuzzer target: the unwind-table builders on arbitrary bytes (offcpu
// builds tables from ELF files other users control): read_elf_cfi on the
// input as an ELF file, parse_cfi on its .eh_frame and .debug_frame and on
// the raw input as either, then clip_rows and build_table, with budgets
// small enough that one input stays fast. Seeded with the shapes of issue
// #26 (tests/support/hostile_cfi.h, written by fuzz_cfi_seeds at fuzz
// start).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "unwind/cfi.h"
#include "unwind/elf_cfi.h"
#include "unwind/table.h"

namespace {

using namespace offcpu::unwind;

void build(const CfiSection &s, const std::vector<ElfCfi::Segment> &loads) {
  CfiBudget budget;
  budget.max_rows = 1u << 16;
  budget.max_steps = 1u << 20;
  CfiStats st;
  std::vector<Row> rows = parse_cfi(s, &st, budget);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto &l : loads)
    if (l.exec && l.vaddr + l.filesz > l.vaddr)
      ranges.emplace_back(l.vaddr, l.vaddr + l.filesz);
  if (ranges.empty())
    ranges.emplace_back(0, ~uint64_t{0});
  uint64_t dropped = 0;
  rows = clip_rows(rows, ranges, &dropped);
  (void)covered_bytes(rows);
  (void)table_pages(rows);
  RuleTable rules;
  FileTable t = build_table(rows, rules);
  if (t.pages.empty())
    return;
  // Every row's address finds a rule, as the BPF walker would.
  for (size_t i = 0; i < rows.size() && i < 4096; i++)
    (void)lookup(t, rules, rows[i].pc);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  // As an ELF file, through a file descriptor as offcpu reads it.
  int fd = memfd_create("fuzz_cfi", 0);
  if (fd >= 0) {
    if (write(fd, bytes.data(), bytes.size()) ==
        static_cast<ssize_t>(bytes.size()))
      for (CfiWant want : {CfiWant::EhFrame, CfiWant::DebugFile})
        if (auto cfi = read_elf_cfi(fd, want)) {
          (void)cfi->code_bytes();
          (void)cfi->vaddr_of_offset(0);
          build({cfi->eh_frame, cfi->eh_frame_vaddr, true}, cfi->loads);
          build({cfi->debug_frame, 0, false}, cfi->loads);
        }
    close(fd);
  }
  if (auto cfi = read_elf_cfi_memory(bytes))
    build({cfi->eh_frame, cfi->eh_frame_vaddr, true}, cfi->loads);
  // The raw bytes as a section of either kind.
  build({bytes, 0x1000, true}, {});
  build({bytes, 0, false}, {});
  return 0;
}
