// One file's rows laid out as the BPF walker reads them: 4 KiB pages, each
// a run of 4-byte rows (offset in the page, rule id), rules deduplicated
// across every file (include/offcpu/unwind.h).
#pragma once

#include <cstdint>
#include <vector>

#include "unwind/cfi.h"
#include "util/flat_memo.h"

namespace offcpu::unwind {

// Distinct rules and their ids; id 0 is UW_RULE_NONE.
class RuleTable {
public:
  RuleTable();
  // The rule's id; UW_RULE_UNSUPPORTED's when the table is full (counted).
  uint16_t intern(const Rule &r);
  const std::vector<Rule> &rules() const { return rules_; }
  uint64_t overflowed() const { return overflowed_; }
  // Forgets the rules added since the table had `size` (a file given up
  // before its rules were loaded).
  void truncate(size_t size);

private:
  struct Hash {
    size_t operator()(const Rule &r) const;
  };
  std::vector<Rule> rules_;
  // Open-addressed: every row of every file is interned (a lookup that
  // nearly always hits), libc alone has ~100,000 rows.
  FlatMemo<Rule, uint16_t, Hash> ids_;
  uint64_t overflowed_ = 0;
};

struct PageRun {
  uint64_t first_page = 0; // page number from base
  uint32_t n_pages = 0;
  uint32_t first_index = 0; // its first page's index in `pages`
};

struct FileTable {
  uint64_t base = 0; // file address of page 0's start
  // At most UW_FILE_RUNS, sorted; pages outside them have no rows.
  std::vector<PageRun> runs;
  // Per page of the runs, in order: first row (index into rows) | row
  // count << 32.
  std::vector<uint64_t> pages;
  std::vector<uint32_t> rows; // offset in page << 16 | rule id
};

// Pages a table of these rows needs (the runs' total), computed from the
// rows alone; nothing is allocated.
uint64_t table_pages(const std::vector<Row> &rows);

// What a file's table may have: pages beyond this mean its rows are spread
// over far more code than they describe (a hostile file): no table.
uint64_t page_allowance(uint64_t rows);

// `rows` sorted by address, as parse_cfi returns them. Empty when the rows
// need more than page_allowance() pages.
FileTable build_table(const std::vector<Row> &rows, RuleTable &rules);

// The rule the table gives for a file address, as the BPF walker finds it
// (for tests and the user-space check of the layout).
Rule lookup(const FileTable &t, const RuleTable &rules, uint64_t addr);

} // namespace offcpu::unwind
