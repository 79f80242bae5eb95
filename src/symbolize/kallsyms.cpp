#include "symbolize/kallsyms.h"

#include <algorithm>
#include <cstdlib>

namespace offcpu {
namespace {

bool is_data_type(char t) {
  switch (t) {
  case 'd': case 'D': case 'b': case 'B':
    return true;
  default:
    return false;
  }
}

bool is_code_type(char t) {
  switch (t) {
  case 't': case 'T': case 'w': case 'W':
    return true;
  default:
    return false;
  }
}

std::string_view next_field(std::string_view &line) {
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  size_t end = line.find_first_of(" \t");
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

} // namespace

KernelSymbols KernelSymbols::parse(std::string_view text) {
  KernelSymbols ks;
  size_t zero_addrs = 0, lines = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);

    std::string_view addr_s = next_field(line);
    std::string_view type_s = next_field(line);
    std::string_view name = next_field(line);
    std::string_view module = next_field(line);
    if (addr_s.empty() || type_s.size() != 1 || name.empty())
      continue;
    lines++;
    std::string addr_str(addr_s);
    char *end = nullptr;
    uint64_t addr = std::strtoull(addr_str.c_str(), &end, 16);
    if (end == nullptr || *end != '\0')
      continue;
    if (addr == 0) {
      zero_addrs++;
      continue;
    }
    bool code = is_code_type(type_s[0]);
    if (!code && !is_data_type(type_s[0]))
      continue;
    KernelSymbol sym;
    sym.addr = addr;
    sym.name.assign(name);
    if (module.size() > 2 && module.front() == '[' && module.back() == ']')
      sym.module.assign(module.substr(1, module.size() - 2));
    (code ? ks.syms_ : ks.data_).push_back(std::move(sym));
  }
  ks.hidden_ = lines > 0 && zero_addrs == lines;
  auto by_addr = [](const KernelSymbol &a, const KernelSymbol &b) {
    return a.addr < b.addr;
  };
  std::stable_sort(ks.syms_.begin(), ks.syms_.end(), by_addr);
  std::stable_sort(ks.data_.begin(), ks.data_.end(), by_addr);
  return ks;
}

KernelSymbols KernelSymbols::load(const FileReader &files) {
  auto text = files.read("/proc/kallsyms", 256u << 20);
  return parse(text ? *text : std::string_view{});
}

namespace {

const KernelSymbol *nearest_at_or_below(const std::vector<KernelSymbol> &v,
                                        uint64_t addr) {
  auto it = std::upper_bound(
      v.begin(), v.end(), addr,
      [](uint64_t a, const KernelSymbol &s) { return a < s.addr; });
  if (it == v.begin())
    return nullptr;
  return &*std::prev(it);
}

} // namespace

const KernelSymbol *KernelSymbols::find(uint64_t addr) const {
  return nearest_at_or_below(syms_, addr);
}

const KernelSymbol *KernelSymbols::find_data(uint64_t addr) const {
  return nearest_at_or_below(data_, addr);
}

} // namespace offcpu
