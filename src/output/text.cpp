#include "output/text.h"

#include <algorithm>

namespace offcpu {

std::string format_text(const std::vector<Sample> &samples,
                        const TextOptions &opts) {
  std::vector<const Sample *> order;
  for (const Sample &s : samples)
    if (s.total_ns >= 500)
      order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const Sample *a, const Sample *b) {
    if (a->total_ns != b->total_ns)
      return a->total_ns < b->total_ns;
    return a->pid != b->pid ? a->pid < b->pid : a->comm < b->comm;
  });

  std::string out;
  for (const Sample *s : order) {
    bool has_user = s->user_missed || !s->user.empty();
    bool has_kernel = s->kernel_missed || !s->kernel.empty();
    if (s->kernel_missed)
      out += "    [Missed Kernel Stack]\n";
    for (auto it = s->kernel.rbegin(); it != s->kernel.rend(); ++it)
      out += "    " + *it + "\n";
    if (opts.delimited && has_user && has_kernel)
      out += "    --\n";
    if (s->user_missed)
      out += "    [Missed User Stack]\n";
    for (auto it = s->user.rbegin(); it != s->user.rend(); ++it)
      out += "    " + *it + "\n";
    out += "    -                " + s->comm + " (" + std::to_string(s->pid) +
           ")\n";
    uint64_t us = (s->total_ns + 500) / 1000;
    out += "        " + std::to_string(us) + " us in " +
           std::to_string(s->count) + (s->count == 1 ? " wait" : " waits") +
           "\n\n";
  }
  return out;
}

} // namespace offcpu
