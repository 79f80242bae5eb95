#include "output/lock_table.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "output/text.h"

namespace offcpu {
namespace {

// Prefixes of the functions of the locking and scheduling code itself,
// which every contention of a kind shares: the caller is below them.
constexpr const char *kLockCode[] = {
    "mutex_",
    "__mutex_",
    "rwsem_",
    "__rwsem",
    "down_",
    "__down",
    "up_",
    "rt_mutex",
    "__rt_mutex",
    "rtlock",
    "_raw_",
    "queued_",
    "native_queued",
    "osq_",
    "percpu_down",
    "__percpu_down",
    "schedule",
    "__schedule",
    "preempt_schedule",
    "io_schedule",
    "ww_mutex",
    "__ww_mutex",
    // glibc's side of a futex wait (its stacks have no kernel part)
    "__lll_",
    "lll_",
    "__pthread_mutex",
    "___pthread_mutex",
    "pthread_mutex",
    "__pthread_cond",
    "___pthread_cond",
    "pthread_cond",
    "__futex",
    "futex_",
    "__GI___lll",
    "__GI___pthread",
    "syscall",
};

bool lock_code(const std::string &name) {
  for (const char *p : kLockCode)
    if (name.compare(0, std::char_traits<char>::length(p), p) == 0)
      return true;
  return false;
}

struct Row {
  std::string kind, lock, caller, thread, cgroup;
  uint64_t count = 0, total_ns = 0, max_ns = 0;
  Latency latency;
  std::map<std::string, uint64_t> callers; // caller -> its total
  std::map<std::string, uint64_t> holders; // futex holder -> its total
  std::vector<const Sample *> samples;
};

std::string us_text(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%" PRIu64 " us", ns / 1000);
  return buf;
}

std::string group_key(const Sample &s, LockGrouping by) {
  const std::string kind = s.lock ? s.lock->kind_frame() : "";
  switch (by) {
  case LockGrouping::Caller:
    return kind + "\n" + lock_caller(s);
  case LockGrouping::Thread:
    return s.comm + "\n" + std::to_string(s.tid);
  case LockGrouping::Cgroup:
    return s.cgroup;
  case LockGrouping::Lock:
    break;
  }
  return kind + "\n" + (s.lock ? s.lock->lock : "");
}

std::vector<Row> rows_of(const Profile &p, LockGrouping by) {
  std::map<std::string, Row> rows;
  for (const Sample &s : p.samples) {
    Row &r = rows[group_key(s, by)];
    r.kind = s.lock ? s.lock->kind_frame() : "";
    r.lock = s.lock ? s.lock->lock : "";
    r.thread = s.comm + " (" + std::to_string(s.tid) + ")";
    r.cgroup = s.cgroup.empty() ? "[no cgroup]" : s.cgroup;
    r.count += s.count;
    r.total_ns += s.total_ns;
    r.max_ns = std::max(r.max_ns, s.lock ? s.lock->max_ns : 0);
    r.latency.add(s.latency);
    r.callers[lock_caller(s)] += s.total_ns;
    if (s.lock && !s.lock->holder.empty())
      r.holders[s.lock->holder] += s.total_ns;
    r.samples.push_back(&s);
  }
  std::vector<Row> out;
  for (auto &kv : rows) {
    Row &r = kv.second;
    r.caller = std::max_element(r.callers.begin(), r.callers.end(),
                                [](const auto &a, const auto &b) {
                                  return a.second < b.second;
                                })
                   ->first;
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const Row &a, const Row &b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.lock < b.lock;
  });
  return out;
}

// -v: the row's quantiles and its stacks (the text report's layout).
std::string row_details(const Row &r, const Profile &p,
                        const LayoutOptions &layout) {
  std::string out;
  if (r.latency.waits > 1) {
    char buf[160];
    snprintf(buf, sizeof(buf),
             "    p50 ~%" PRIu64 " us, p90 ~%" PRIu64 " us, p99 ~%" PRIu64
             " us, max %" PRIu64 " us\n",
             r.latency.quantile_ns(0.5) / 1000,
             r.latency.quantile_ns(0.9) / 1000,
             r.latency.quantile_ns(0.99) / 1000, r.max_ns / 1000);
    out += buf;
  }
  if (!r.holders.empty()) {
    auto top = std::max_element(
        r.holders.begin(), r.holders.end(),
        [](const auto &a, const auto &b) { return a.second < b.second; });
    out += "    top holder " + top->first + ": woke waits of " +
           us_text(top->second) + "\n";
  }
  Profile part;
  part.kind = p.kind;
  part.modules = p.modules;
  for (const Sample *s : r.samples)
    part.samples.push_back(*s);
  std::string stacks = render_text(part, layout, true);
  for (size_t at = 0; at < stacks.size();) {
    size_t nl = stacks.find('\n', at);
    if (nl == std::string::npos)
      nl = stacks.size();
    out += "    " + stacks.substr(at, nl - at) + "\n";
    at = nl + 1;
  }
  return out;
}

} // namespace

std::string lock_caller(const Sample &s) {
  // Kernel frames are root first: the caller is the one just above the
  // locking code, walking from the leaf.
  for (auto it = s.kernel.rbegin(); it != s.kernel.rend(); ++it) {
    if (it->inlined || lock_code(it->name))
      continue;
    return it->name;
  }
  // User frames likewise (a futex wait's), past glibc's unnamed ones too.
  for (auto it = s.user.rbegin(); it != s.user.rend(); ++it)
    if (!it->inlined && !lock_code(it->name) && it->name.rfind('[', 0) != 0)
      return it->name;
  if (!s.user.empty())
    return s.user.back().name;
  return "[unknown]";
}

std::string render_lock_table(const Profile &profile, LockGrouping by,
                              bool verbose, const LayoutOptions &layout) {
  std::vector<Row> rows = rows_of(profile, by);
  if (rows.empty())
    return {};
  const char *last = by == LockGrouping::Thread ? "thread" : "top caller";
  char line[512];
  // By cgroup: a row's kinds are mixed; its name in the lock's column.
  const char *what_head = by == LockGrouping::Caller   ? "caller"
                          : by == LockGrouping::Cgroup ? "cgroup"
                                                       : "lock";
  snprintf(line, sizeof(line), "%10s %14s %12s %12s  %-18s %-28s %s\n",
           "contended", "total wait", "max wait", "avg wait", "kind", what_head,
           last);
  std::string out = line;
  for (Row &r : rows) {
    if (by == LockGrouping::Cgroup && r.samples.size() > 1)
      for (const Sample *s : r.samples)
        if (s->lock && s->lock->kind_frame() != r.kind)
          r.kind = "(several)";
    const std::string what = by == LockGrouping::Caller   ? r.caller
                             : by == LockGrouping::Cgroup ? r.cgroup
                                                          : r.lock;
    const std::string tail = by == LockGrouping::Thread ? r.thread : r.caller;
    snprintf(line, sizeof(line),
             "%10" PRIu64 " %14s %12s %12s  %-18s %-28s %s\n", r.count,
             us_text(r.total_ns).c_str(), us_text(r.max_ns).c_str(),
             us_text(r.count ? r.total_ns / r.count : 0).c_str(),
             r.kind.c_str(), what.c_str(), tail.c_str());
    out += line;
    // The row's latency distribution: where its total comes from (many
    // short waits, or a few long ones).
    if (r.latency.waits > 1)
      out += latency_histogram(r.latency);
    if (verbose)
      out += row_details(r, profile, layout);
  }
  return out;
}

} // namespace offcpu
