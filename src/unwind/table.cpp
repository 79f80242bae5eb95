#include "unwind/table.h"

#include <algorithm>

namespace offcpu::unwind {

RuleTable::RuleTable() {
  rules_.push_back(Rule{}); // id 0: no CFI here
  ids_.add(Rule{}, 0);
}

size_t RuleTable::Hash::operator()(const Rule &r) const {
  uint64_t h = static_cast<uint32_t>(r.cfa_off);
  h = h * 0x9e3779b97f4a7c15ULL ^ static_cast<uint16_t>(r.bp_off);
  h = h * 0x9e3779b97f4a7c15ULL ^ (uint64_t{r.kind} << 8 | r.flags);
  return static_cast<size_t>(h ^ (h >> 29));
}

uint16_t RuleTable::intern(const Rule &r) {
  if (const uint16_t *id = ids_.find(r))
    return *id;
  if (rules_.size() >= UW_MAX_RULES - 1) {
    overflowed_++;
    Rule stop;
    stop.kind = UW_RULE_UNSUPPORTED;
    return r == stop ? 0 : intern(stop);
  }
  auto id = static_cast<uint16_t>(rules_.size());
  rules_.push_back(r);
  ids_.add(r, id);
  return id;
}

namespace {

// Page intervals [first, last] (from base) that need a descriptor: under
// a rule other than NONE, merged, then cut into at most UW_FILE_RUNS runs
// at the widest gaps.
std::vector<std::pair<uint64_t, uint64_t>>
page_runs(const std::vector<Row> &rows, uint64_t base) {
  std::vector<std::pair<uint64_t, uint64_t>> iv;
  for (size_t i = 0; i + 1 < rows.size(); i++) {
    if (rows[i].rule.kind == UW_RULE_NONE || rows[i + 1].pc <= rows[i].pc)
      continue;
    uint64_t a = (rows[i].pc - base) / UW_PAGE_SIZE;
    uint64_t b = (rows[i + 1].pc - 1 - base) / UW_PAGE_SIZE;
    if (!iv.empty() && a <= iv.back().second + 1)
      iv.back().second = std::max(iv.back().second, b);
    else
      iv.emplace_back(a, b);
  }
  if (iv.size() <= UW_FILE_RUNS)
    return iv;
  // Keep the UW_FILE_RUNS - 1 widest gaps; merge across the others.
  std::vector<size_t> gaps(iv.size() - 1);
  for (size_t i = 0; i < gaps.size(); i++)
    gaps[i] = i;
  auto wider = [&](size_t x, size_t y) {
    uint64_t gx = iv[x + 1].first - iv[x].second;
    uint64_t gy = iv[y + 1].first - iv[y].second;
    return gx != gy ? gx > gy : x < y;
  };
  std::nth_element(gaps.begin(), gaps.begin() + (UW_FILE_RUNS - 2), gaps.end(),
                   wider);
  gaps.resize(UW_FILE_RUNS - 1);
  std::sort(gaps.begin(), gaps.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  size_t from = 0;
  for (size_t g : gaps) {
    out.emplace_back(iv[from].first, iv[g].second);
    from = g + 1;
  }
  out.emplace_back(iv[from].first, iv.back().second);
  return out;
}

uint64_t base_of(const std::vector<Row> &rows) {
  return rows.front().pc & ~uint64_t{UW_PAGE_SIZE - 1};
}

} // namespace

uint64_t table_pages(const std::vector<Row> &rows) {
  if (rows.empty())
    return 0;
  uint64_t n = 0;
  for (const auto &r : page_runs(rows, base_of(rows)))
    n += r.second - r.first + 1; // cannot wrap: at most 2^52 pages
  return n;
}

uint64_t page_allowance(uint64_t rows) {
  // Real code has tens of rows per 4 KiB page; a long function with few
  // rule changes needs a page per 4 KiB with no rows of its own, hence the
  // constant (1 MiB of code, 2 KiB of descriptors).
  return rows / 8 + 256;
}

void RuleTable::truncate(size_t size) {
  size = std::max<size_t>(size, 1); // id 0 stays
  if (size >= rules_.size())
    return;
  // Rare (a file given up): the memo, which cannot forget, is rebuilt.
  rules_.resize(size);
  ids_ = {};
  for (size_t i = 0; i < rules_.size(); i++)
    ids_.add(rules_[i], static_cast<uint16_t>(i));
}

FileTable build_table(const std::vector<Row> &rows, RuleTable &rules) {
  FileTable t;
  if (rows.empty() || table_pages(rows) > page_allowance(rows.size()))
    return t;
  t.base = base_of(rows);
  size_t i = 0;
  auto add = [&](uint64_t off, const Rule &r) {
    t.rows.push_back(static_cast<uint32_t>(off << UW_ROW_OFFSET_SHIFT) |
                     rules.intern(r));
  };
  for (const auto &run : page_runs(rows, t.base)) {
    PageRun pr;
    pr.first_page = run.first;
    pr.n_pages = static_cast<uint32_t>(run.second - run.first + 1);
    pr.first_index = static_cast<uint32_t>(t.pages.size());
    t.runs.push_back(pr);
    for (uint64_t p = run.first; p <= run.second; p++) {
      const uint64_t start = t.base + p * UW_PAGE_SIZE;
      const uint64_t first = t.rows.size();
      // Rows that end before the page (the last page of the run may stop
      // short of UINT64_MAX: compare offsets from base, never wrap).
      while (i < rows.size() && rows[i].pc - t.base < p * UW_PAGE_SIZE)
        i++;
      // The rule in force where the page begins, unless a row begins there.
      bool row_at_start = i < rows.size() && rows[i].pc == start;
      if (i > 0 && !row_at_start && rows[i - 1].rule.kind != UW_RULE_NONE)
        add(0, rows[i - 1].rule);
      for (; i < rows.size() && (rows[i].pc - t.base) / UW_PAGE_SIZE == p; i++)
        add(rows[i].pc - start, rows[i].rule);
      t.pages.push_back(first | (t.rows.size() - first) << 32);
    }
  }
  return t;
}

Rule lookup(const FileTable &t, const RuleTable &rules, uint64_t addr) {
  if (addr < t.base)
    return Rule{};
  uint64_t page = (addr - t.base) / UW_PAGE_SIZE;
  const PageRun *in = nullptr;
  for (const PageRun &r : t.runs)
    if (page >= r.first_page && page - r.first_page < r.n_pages)
      in = &r;
  if (!in)
    return Rule{};
  uint64_t desc = t.pages[in->first_index + (page - in->first_page)];
  uint64_t first = static_cast<uint32_t>(desc);
  uint64_t count = desc >> 32;
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
