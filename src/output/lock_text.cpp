#include "output/lock_text.h"

#include <algorithm>

#include "output/folded.h"

namespace offcpu {
namespace {

std::string us(uint64_t ns) {
  return std::to_string((ns + 500) / 1000) + " us";
}

} // namespace

std::string format_lock_text(const std::vector<LockSample> &samples,
                             bool delimited) {
  std::vector<const LockSample *> order;
  for (const LockSample &s : samples)
    order.push_back(&s);
  std::sort(order.begin(), order.end(),
            [](const LockSample *a, const LockSample *b) {
              if (a->wait.total_ns != b->wait.total_ns)
                return a->wait.total_ns < b->wait.total_ns;
              return a->wait.pid < b->wait.pid;
            });
  std::string out;
  for (const LockSample *ls : order) {
    const Sample &s = ls->wait;
    bool has_user = s.user_missed || !s.user.empty();
    bool has_kernel = s.kernel_missed || !s.kernel.empty();
    if (s.kernel_missed)
      out += "    [Missed Kernel Stack]\n";
    for (auto it = s.kernel.rbegin(); it != s.kernel.rend(); ++it)
      out += "    " + *it + "\n";
    if (delimited && has_user && has_kernel)
      out += "    --\n";
    if (s.user_missed)
      out += "    [Missed User Stack]\n";
    for (auto it = s.user.rbegin(); it != s.user.rend(); ++it)
      out += "    " + *it + "\n";
    out += "    -                " + s.comm + " (" + std::to_string(s.pid) +
           ") " + (ls->write ? "write" : "read") + " wait on " + ls->lock +
           "\n";
    uint64_t avg = s.count ? s.total_ns / s.count : 0;
    out += "        " + std::to_string(s.count) +
           (s.count == 1 ? " wait" : " waits") + ", total " + us(s.total_ns) +
           ", max " + us(ls->max_ns) + ", avg " + us(avg) + "\n\n";
  }
  return out;
}

std::string format_lock_folded(const std::vector<LockSample> &samples,
                               bool delimited) {
  std::vector<Sample> plain;
  plain.reserve(samples.size());
  for (const LockSample &ls : samples)
    plain.push_back(ls.wait);
  return format_folded(plain, FoldedOptions{delimited});
}

} // namespace offcpu
