#include "unwind/table.h"

#include <algorithm>

namespace offcpu::unwind {

RuleTable::RuleTable() {
  rules_.push_back(Rule{}); // id 0: no CFI here
  ids_[Rule{}] = 0;
}

size_t RuleTable::Hash::operator()(const Rule &r) const {
  uint64_t h = static_cast<uint32_t>(r.cfa_off);
  h = h * 0x9e3779b97f4a7c15ULL ^ static_cast<uint16_t>(r.bp_off);
  h = h * 0x9e3779b97f4a7c15ULL ^ (uint64_t{r.kind} << 8 | r.flags);
  return static_cast<size_t>(h ^ (h >> 29));
}

uint16_t RuleTable::intern(const Rule &r) {
  auto it = ids_.find(r);
  if (it != ids_.end())
    return it->second;
  if (rules_.size() >= UW_MAX_RULES - 1) {
    overflowed_++;
    Rule stop;
    stop.kind = UW_RULE_UNSUPPORTED;
    return r == stop ? 0 : intern(stop);
  }
  auto id = static_cast<uint16_t>(rules_.size());
  rules_.push_back(r);
  ids_.emplace(r, id);
  return id;
}

FileTable build_table(const std::vector<Row> &rows, RuleTable &rules) {
  FileTable t;
  if (rows.empty())
    return t;
  t.base = rows.front().pc & ~uint64_t{UW_PAGE_SIZE - 1};
  const uint64_t end = rows.back().pc; // the last row ends the coverage
  if (end <= t.base)
    return t;
  const uint64_t n_pages = (end - 1 - t.base) / UW_PAGE_SIZE + 1;
  t.pages.reserve(n_pages);
  t.rows.reserve(rows.size() + n_pages);
  size_t i = 0;
  auto add = [&](uint64_t off, const Rule &r) {
    t.rows.push_back(static_cast<uint32_t>(off << UW_ROW_OFFSET_SHIFT) |
                     rules.intern(r));
  };
  for (uint64_t p = 0; p < n_pages; p++) {
    const uint64_t start = t.base + p * UW_PAGE_SIZE;
    const uint64_t stop = start + UW_PAGE_SIZE;
    const uint64_t first = t.rows.size();
    while (i < rows.size() && rows[i].pc < start)
      i++;
    // The rule in force where the page begins, unless a row begins there.
    bool row_at_start = i < rows.size() && rows[i].pc == start;
    if (i > 0 && !row_at_start && rows[i - 1].rule.kind != UW_RULE_NONE)
      add(0, rows[i - 1].rule);
    for (; i < rows.size() && rows[i].pc < stop; i++)
      add(rows[i].pc - start, rows[i].rule);
    t.pages.push_back(first | (t.rows.size() - first) << 32);
  }
  return t;
}

Rule lookup(const FileTable &t, const RuleTable &rules, uint64_t addr) {
  if (addr < t.base)
    return Rule{};
  uint64_t page = (addr - t.base) / UW_PAGE_SIZE;
  if (page >= t.pages.size())
    return Rule{};
  uint64_t first = static_cast<uint32_t>(t.pages[page]);
  uint64_t count = t.pages[page] >> 32;
  uint32_t off = (addr - t.base) % UW_PAGE_SIZE;
  auto b = t.rows.begin() + static_cast<std::ptrdiff_t>(first);
  auto e = b + static_cast<std::ptrdiff_t>(count);
  auto it = std::upper_bound(b, e, off, [](uint32_t o, uint32_t row) {
    return o < (row >> UW_ROW_OFFSET_SHIFT);
  });
  if (it == b)
    return Rule{};
  return rules.rules()[*(it - 1) & UW_ROW_RULE_MASK];
}

} // namespace offcpu::unwind
