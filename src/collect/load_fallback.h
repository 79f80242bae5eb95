// The loads that failed before one succeeded, said in one warning line:
// a plan the kernel probes chose that then fails to load is a bug or an
// odd kernel, and its fallback has a cost the user should know of (a
// fallback the probes chose, for a feature the kernel lacks, is not one of
// these: nothing was tried and failed).
#pragma once

#include <string>
#include <vector>

namespace offcpu {

class LoadFallbacks {
public:
  // `what` failed to load with errno `err` (either sign); `cost`: what
  // taking the next choice instead costs.
  void failed(const std::string &what, int err, const std::string &cost);
  bool any() const { return !failed_.empty(); }
  // One line for warn() once `loaded` loaded: what failed and why, what
  // loaded instead and what that costs. Empty if nothing failed.
  std::string warning(const std::string &loaded) const;

private:
  std::vector<std::string> failed_, costs_;
};

} // namespace offcpu
