#include "symbolize/kallsyms.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "util/parse.h"

namespace offcpu {
namespace {

bool is_code_type(char t) {
  return t == 't' || t == 'T' || t == 'w' || t == 'W';
}
bool is_data_type(char t) {
  return t == 'd' || t == 'D' || t == 'b' || t == 'B';
}

// A linker's section boundary (__start___bug_table, __init_begin), no
// variable: a kernel without CONFIG_KALLSYMS_ALL lists only these among
// its data symbols, and an address after one is not in it.
bool is_section_marker(std::string_view name) {
  for (std::string_view prefix : {"__start_", "__stop_", "__end_"})
    if (name.substr(0, prefix.size()) == prefix)
      return true;
  for (std::string_view marker :
       {"__init_begin", "__init_end", "__bss_start", "__bss_stop", "_sdata",
        "_edata", "_end", "__per_cpu_start", "__per_cpu_end"})
    if (name == marker)
      return true;
  return false;
}

} // namespace

// Takes the file in chunks; lines may span chunk boundaries.
class KernelSymbols::Parser {
public:
  Parser(KernelSymbols &ks, bool with_data) : ks_(ks), with_data_(with_data) {}

  void feed(std::string_view chunk) {
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) {
        if (partial_.size() < 4096) // longer is not a kallsyms line
          partial_.append(chunk);
        return;
      }
      if (partial_.empty()) {
        line(chunk.substr(0, nl));
      } else {
        partial_.append(chunk.substr(0, nl));
        line(partial_);
        partial_.clear();
      }
      chunk.remove_prefix(nl + 1);
    }
  }

  void finish() {
    if (!partial_.empty())
      line(partial_);
    ks_.hidden_ = lines_ > 0 && zero_ == lines_;
    auto by_addr = [](const Entry &a, const Entry &b) {
      return a.addr < b.addr;
    };
    std::stable_sort(ks_.code_.begin(), ks_.code_.end(), by_addr);
    std::stable_sort(ks_.data_.begin(), ks_.data_.end(), by_addr);
    ks_.code_.shrink_to_fit();
    ks_.data_.shrink_to_fit();
    ks_.names_.shrink_to_fit();
  }

private:
  void line(std::string_view l) {
    std::string_view addr_s = next_field(l), type_s = next_field(l);
    std::string_view name = next_field(l), module = next_field(l);
    uint64_t addr = 0;
    if (type_s.size() != 1 || name.empty() || !parse_hex(addr_s, addr))
      return;
    lines_++;
    if (addr == 0) {
      zero_++;
      return;
    }
    bool code = is_code_type(type_s[0]);
    if (!code && !(with_data_ && is_data_type(type_s[0])))
      return;
    if (name.size() > std::numeric_limits<uint16_t>::max() ||
        ks_.names_.size() + name.size() > std::numeric_limits<uint32_t>::max())
      return;
    Entry e{addr, static_cast<uint32_t>(ks_.names_.size()),
            static_cast<uint16_t>(name.size()), 0};
    ks_.names_.append(name);
    if (module.size() > 2 && module.front() == '[' && module.back() == ']')
      e.module = module_index(module.substr(1, module.size() - 2));
    (code ? ks_.code_ : ks_.data_).push_back(e);
  }

  uint16_t module_index(std::string_view m) {
    // Modules come in runs: the last one is almost always the one.
    if (ks_.modules_.back() == m)
      return static_cast<uint16_t>(ks_.modules_.size() - 1);
    for (size_t i = 1; i < ks_.modules_.size(); i++)
      if (ks_.modules_[i] == m)
        return static_cast<uint16_t>(i);
    if (ks_.modules_.size() >= std::numeric_limits<uint16_t>::max())
      return 0;
    ks_.modules_.emplace_back(m);
    return static_cast<uint16_t>(ks_.modules_.size() - 1);
  }

  KernelSymbols &ks_;
  bool with_data_;
  std::string partial_;
  size_t lines_ = 0, zero_ = 0;
};

KernelSymbols KernelSymbols::parse(std::string_view text, bool with_data) {
  KernelSymbols ks;
  Parser p(ks, with_data);
  p.feed(text);
  p.finish();
  return ks;
}

KernelSymbols KernelSymbols::load(const FileReader &files, bool with_data) {
  KernelSymbols ks;
  Parser p(ks, with_data);
  files.read_chunks("/proc/kallsyms", 256u << 20,
                    [&](std::string_view chunk) { p.feed(chunk); });
  p.finish();
  return ks;
}

KernelSymbols
KernelSymbols::from_printed(const std::vector<PrintedSymbol> &printed) {
  KernelSymbols ks;
  for (const PrintedSymbol &p : printed) {
    const uint64_t addr = p.addr;
    std::string_view s = p.text, module;
    size_t bracket = s.find(" [");
    if (bracket != std::string_view::npos) {
      module = s.substr(bracket + 2);
      s = s.substr(0, bracket);
      if (module.empty() || module.back() != ']')
        continue;
      module.remove_suffix(1);
    }
    size_t plus = s.rfind('+'), slash = s.rfind('/');
    auto hex = [](std::string_view h, uint64_t &out) {
      return h.substr(0, 2) == "0x" && parse_hex(h.substr(2), out);
    };
    uint64_t off = 0, size = 0;
    if (plus == std::string_view::npos || plus == 0 || slash < plus ||
        slash == std::string_view::npos ||
        !hex(s.substr(plus + 1, slash - plus - 1), off) ||
        !hex(s.substr(slash + 1), size) || off >= size || off > addr)
      continue;
    std::string_view name = s.substr(0, plus);
    if (name.size() > std::numeric_limits<uint16_t>::max())
      continue;
    Entry e{addr - off, static_cast<uint32_t>(ks.names_.size()),
            static_cast<uint16_t>(name.size()), 0};
    ks.names_.append(name);
    if (!module.empty()) {
      auto it = std::find(ks.modules_.begin() + 1, ks.modules_.end(), module);
      e.module = static_cast<uint16_t>(it - ks.modules_.begin());
      if (it == ks.modules_.end())
        ks.modules_.emplace_back(module);
    }
    (p.data ? ks.data_ : ks.code_).push_back(e);
  }
  for (std::vector<Entry> *v : {&ks.code_, &ks.data_}) {
    std::sort(v->begin(), v->end(),
              [](const Entry &a, const Entry &b) { return a.addr < b.addr; });
    v->erase(std::unique(v->begin(), v->end(),
                         [](const Entry &a, const Entry &b) {
                           return a.addr == b.addr;
                         }),
             v->end());
  }
  return ks;
}

std::optional<KernelSymbol> KernelSymbols::view(const std::vector<Entry> &v,
                                                uint64_t addr) const {
  auto it =
      std::upper_bound(v.begin(), v.end(), addr,
                       [](uint64_t a, const Entry &e) { return a < e.addr; });
  if (it == v.begin())
    return std::nullopt;
  const Entry &e = *std::prev(it);
  return KernelSymbol{e.addr,
                      std::string_view(names_).substr(e.name_off, e.name_len),
                      modules_[e.module]};
}

std::optional<KernelSymbol> KernelSymbols::find(uint64_t addr) const {
  return view(code_, addr);
}

std::optional<KernelSymbol> KernelSymbols::find_data(uint64_t addr) const {
  auto s = view(data_, addr);
  if (s && is_section_marker(s->name))
    return std::nullopt;
  return s;
}

} // namespace offcpu
