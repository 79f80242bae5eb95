// Call frame information (.eh_frame, .debug_frame) run into the rows the
// BPF walker uses: per address range, one rule (include/offcpu/unwind.h).
// x86-64 only. The bytes come from files other users control: every length,
// offset and count is checked; bad entries are skipped and counted.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "offcpu/unwind.h"

namespace offcpu::unwind {

struct Rule {
  uint8_t kind = UW_RULE_NONE;
  uint8_t flags = 0;
  int16_t bp_off = 0;
  int32_t cfa_off = 0;
  bool operator==(const Rule &o) const {
    return kind == o.kind && flags == o.flags && bp_off == o.bp_off &&
           cfa_off == o.cfa_off;
  }
  bool operator!=(const Rule &o) const { return !(*this == o); }
};

// `rule` applies from `pc` up to the next row's pc. UW_RULE_NONE rows mark
// addresses no FDE covers.
struct Row {
  uint64_t pc = 0;
  Rule rule;
};

struct CfiSection {
  std::string_view data;
  uint64_t vaddr = 0;   // address of data[0] in the file (pc-relative pointers)
  bool eh_frame = true; // else .debug_frame: other CIE ids, absolute addresses
};

// Why a file's CFI was given up (the whole file: frame pointers there).
// Interrupted is no budget: the run is ending (its window closed, or a
// signal), the file's table is no longer needed.
enum class OverBudget : uint8_t { None, Rows, Steps, Time, Interrupted };

// What one file's CFI may cost. Each interpreter step reads at least one
// byte and a CIE's initial instructions run once per CIE, so steps are
// bounded by the section's size; these caps bound it further.
struct CfiBudget {
  // The largest real files have ~1.5M rows (libLLVM: 1.44M, 3.3M steps,
  // 155 ms of CPU).
  uint64_t max_rows = uint64_t{4} << 20; // 16 MiB of kernel rows
  uint64_t max_steps = uint64_t{16} << 20;
  uint64_t deadline_ns = 0;           // CLOCK_MONOTONIC; 0: none
  uint64_t stop_ns = 0;               // the run's end: Interrupted from then on
  bool (*stop_requested)() = nullptr; // a signal asked the run to end
};

struct CfiStats {
  uint64_t fdes = 0;
  uint64_t bad_entries = 0;      // malformed CIE/FDE, skipped
  uint64_t unsupported_rows = 0; // rows the walker cannot follow
  uint64_t steps = 0;            // interpreter steps, CIEs' included
  OverBudget over = OverBudget::None;
};

// The rows of every FDE, sorted by address, consecutive equal rules merged.
// Empty, with stats->over set, when the budget ran out.
std::vector<Row> parse_cfi(const CfiSection &section, CfiStats *stats,
                           const CfiBudget &budget = {});

// `rows` restricted to `ranges` ([begin, end) file addresses, the file's
// executable PT_LOAD segments): a rule never reaches outside them. Rules
// that lie wholly outside are dropped and counted in `*dropped`.
std::vector<Row> clip_rows(std::vector<Row> rows,
                           std::vector<std::pair<uint64_t, uint64_t>> ranges,
                           uint64_t *dropped);

// Bytes of code the rows give a rule for.
uint64_t covered_bytes(const std::vector<Row> &rows);

// `primary`'s rules where it has one, `secondary`'s elsewhere (.eh_frame
// and a debug file's .debug_frame for code built partly without the former).
std::vector<Row> merge_rows(const std::vector<Row> &primary,
                            const std::vector<Row> &secondary);

} // namespace offcpu::unwind
