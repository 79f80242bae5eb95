// Kernel symbols from /proc/kallsyms: parsed once, sorted, binary searched.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/fs.h"

namespace offcpu {

struct KernelSymbol {
  uint64_t addr = 0;
  std::string name;
  std::string module; // empty for the core kernel
};

class KernelSymbols {
public:
  // Parses kallsyms text; lines it cannot read are skipped.
  static KernelSymbols parse(std::string_view text);
  // Reads /proc/kallsyms through `files`.
  static KernelSymbols load(const FileReader &files);

  // The symbol whose range holds addr (up to the next symbol), or null.
  const KernelSymbol *find(uint64_t addr) const;
  // The nearest data/bss symbol at or below addr (global locks), or null.
  const KernelSymbol *find_data(uint64_t addr) const;
  std::size_t size() const { return syms_.size(); }
  // kptr_restrict hides addresses as zeros: nothing can be named.
  bool addresses_hidden() const { return hidden_; }

private:
  std::vector<KernelSymbol> syms_;
  std::vector<KernelSymbol> data_;
  bool hidden_ = false;
};

} // namespace offcpu
