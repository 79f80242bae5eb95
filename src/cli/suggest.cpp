#include "cli/suggest.h"

#include <algorithm>

namespace offcpu {

size_t edit_distance(const std::string &a, const std::string &b) {
  // Optimal string alignment: three rows of the dynamic-programming table.
  const size_t n = b.size();
  std::vector<size_t> before(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; j++)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    cur[0] = i;
    for (size_t j = 1; j <= n; j++) {
      const size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[n];
}

std::string closest_name(const std::string &typed,
                         const std::vector<std::string> &known) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string &name : known) {
    const size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  // "--wakerz" -> "--wakers"; "--x" is not "--pid".
  if (best_distance == 0 || best_distance > 2 ||
      best_distance * 3 > std::max(typed.size(), best.size()))
    return {};
  return best;
}

} // namespace offcpu
