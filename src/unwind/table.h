// One file's rows laid out as the BPF walker reads them: 4 KiB pages, each
// a run of 4-byte rows (offset in the page, rule id), rules deduplicated
// across every file (include/offcpu/unwind.h).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "unwind/cfi.h"

namespace offcpu::unwind {

// Distinct rules and their ids; id 0 is UW_RULE_NONE.
class RuleTable {
public:
  RuleTable();
  // The rule's id; UW_RULE_UNSUPPORTED's when the table is full (counted).
  uint16_t intern(const Rule &r);
  const std::vector<Rule> &rules() const { return rules_; }
  uint64_t overflowed() const { return overflowed_; }

private:
  struct Hash {
    size_t operator()(const Rule &r) const;
  };
  std::vector<Rule> rules_;
  std::unordered_map<Rule, uint16_t, Hash> ids_;
  uint64_t overflowed_ = 0;
};

struct FileTable {
  uint64_t base = 0; // file address of page 0's start
  // Per page: first row (index into rows) | row count << 32.
  std::vector<uint64_t> pages;
  std::vector<uint32_t> rows; // offset in page << 16 | rule id
};

// `rows` sorted by address, as parse_cfi returns them.
FileTable build_table(const std::vector<Row> &rows, RuleTable &rules);

// The rule the table gives for a file address, as the BPF walker finds it
// (for tests and the user-space check of the layout).
Rule lookup(const FileTable &t, const RuleTable &rules, uint64_t addr);

} // namespace offcpu::unwind
