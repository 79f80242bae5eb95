#include "output/folded.h"

#include <algorithm>
#include <map>

namespace offcpu {

std::string folded_safe(const std::string &name) {
  std::string s = name;
  for (char &c : s) {
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  }
  if (s.empty())
    s = "[unknown]";
  return s;
}

std::string format_folded(const std::vector<Sample> &samples,
                          const FoldedOptions &opts) {
  std::map<std::string, uint64_t> ns_by_line;
  for (const Sample &s : samples) {
    std::string line = folded_safe(s.comm);
    bool has_user = s.user_missed || !s.user.empty();
    bool has_kernel = s.kernel_missed || !s.kernel.empty();
    if (s.user_missed)
      line += ";[Missed User Stack]";
    for (const std::string &f : s.user)
      line += ";" + folded_safe(f);
    if (opts.delimited && has_user && has_kernel)
      line += ";-";
    if (s.kernel_missed)
      line += ";[Missed Kernel Stack]";
    for (const std::string &f : s.kernel)
      line += ";" + folded_safe(f);
    ns_by_line[line] += s.total_ns;
  }
  std::vector<std::pair<uint64_t, const std::string *>> lines;
  for (const auto &[line, ns] : ns_by_line) {
    uint64_t us = (ns + 500) / 1000;
    if (us > 0)
      lines.emplace_back(us, &line);
  }
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  std::string out;
  for (const auto &[us, line] : lines)
    out += *line + " " + std::to_string(us) + "\n";
  return out;
}

} // namespace offcpu
