#include "collect/load_fallback.h"

#include "util/error.h"

namespace offcpu {

void LoadFallbacks::failed(const std::string &what, int err,
                           const std::string &cost) {
  failed_.push_back(what + " (" + errno_text(err < 0 ? -err : err) + ")");
  costs_.push_back(cost);
}

std::string LoadFallbacks::warning(const std::string &loaded) const {
  if (failed_.empty())
    return {};
  auto join = [](const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v)
      s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  return join(failed_) + " failed to load; loaded " + loaded +
         " instead: " + join(costs_) + " (-v says why)";
}

} // namespace offcpu
