// Kernel symbols from /proc/kallsyms: parsed once, streamed (the file is
// several MB), stored compactly, sorted, binary searched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/fs.h"

namespace offcpu {

// An address as the kernel printed it with %pS ("func+0x1c/0x60 [mod]").
struct PrintedSymbol {
  uint64_t addr = 0;
  std::string text;
  bool data = false; // a data address (a lock), not code
};

// A view into KernelSymbols' storage: valid while it lives.
struct KernelSymbol {
  uint64_t addr = 0;
  std::string_view name;
  std::string_view module; // empty for the core kernel
};

class KernelSymbols {
public:
  // `with_data` also keeps data/bss symbols (to name global locks).
  static KernelSymbols parse(std::string_view text, bool with_data = true);
  // Reads /proc/kallsyms through `files`.
  static KernelSymbols load(const FileReader &files, bool with_data = false);
  // From addresses the kernel printed with %pS ("func+0x1c/0x60 [mod]"):
  // knows the symbols holding those addresses only. Unparsable ones (an
  // unknown address prints as plain hex) are left out.
  static KernelSymbols from_printed(const std::vector<PrintedSymbol> &printed);

  // The code symbol whose range holds addr (up to the next symbol).
  std::optional<KernelSymbol> find(uint64_t addr) const;
  // The nearest data/bss symbol at or below addr, if kept; none where that
  // is a section's boundary marker (__start_*), not a variable.
  std::optional<KernelSymbol> find_data(uint64_t addr) const;
  std::size_t size() const { return code_.size(); }
  // kptr_restrict hides addresses as zeros: nothing can be named.
  bool addresses_hidden() const { return hidden_; }

private:
  struct Entry {
    uint64_t addr;
    uint32_t name_off;
    uint16_t name_len;
    uint16_t module; // index into modules_, 0 = core kernel
  };
  class Parser;

  std::optional<KernelSymbol> view(const std::vector<Entry> &v,
                                   uint64_t addr) const;

  std::vector<Entry> code_;
  std::vector<Entry> data_;
  std::string names_;
  std::vector<std::string> modules_{""};
  bool hidden_ = false;
};

} // namespace offcpu
