#include "symbolize/symbol_versions.h"

#include <unordered_map>

namespace offcpu {
namespace {

// "f@V" (one '@'): a version kept for old binaries, not the one new
// programs link against.
bool old_version(std::string_view name) {
  size_t at = name.find('@');
  return at != std::string_view::npos && name.compare(at, 2, "@@") != 0;
}

size_t leading_underscores(std::string_view name) {
  size_t n = name.find_first_not_of('_');
  return n == std::string_view::npos ? name.size() : n;
}

} // namespace

std::string_view unversioned(std::string_view name) {
  size_t at = name.find('@');
  // "@" first would leave nothing: not a version.
  return at == std::string_view::npos || at == 0 ? name : name.substr(0, at);
}

bool better_alias(const ElfSymbol &a, const ElfSymbol &b) {
  std::string_view pa = unversioned(a.name), pb = unversioned(b.name);
  size_t ua = leading_underscores(pa), ub = leading_underscores(pb);
  if (ua != ub)
    return ua < ub;
  bool a_old = old_version(a.name), b_old = old_version(b.name);
  if (a_old != b_old)
    return !a_old;
  if (pa.size() != pb.size())
    return pa.size() < pb.size();
  return a.name < b.name;
}

void drop_symbol_versions(std::vector<ElfSymbol> &symbols) {
  // Plain names held by a current (or unversioned) function.
  std::unordered_map<std::string_view, uint64_t> current;
  for (const ElfSymbol &s : symbols)
    if (!old_version(s.name))
      current.emplace(unversioned(s.name), s.addr);
  std::vector<bool> keep(symbols.size(), false);
  for (size_t i = 0; i < symbols.size(); i++) {
    const ElfSymbol &s = symbols[i];
    if (!old_version(s.name))
      continue;
    auto it = current.find(unversioned(s.name));
    keep[i] = it != current.end() && it->second != s.addr;
  }
  for (size_t i = 0; i < symbols.size(); i++) {
    std::string_view &name = symbols[i].name;
    if (!keep[i])
      name = unversioned(name);
  }
}

} // namespace offcpu
