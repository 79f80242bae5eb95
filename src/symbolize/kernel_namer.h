// Kernel symbols for a set of addresses, named by the kernel itself: a BPF
// program prints each with %pS (bpf_snprintf, 5.13+; syscall programs,
// 5.14+). A few hundred lookups instead of having the kernel format all of
// /proc/kallsyms (120,000 lines, ~50 ms of CPU) to find them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symbolize/kallsyms.h"

namespace offcpu {

// Symbols holding the code addresses `addrs` (and addr - 1, for return
// addresses) and the data addresses `data` (locks); nullopt with the reason
// in *why when the kernel cannot run the namer.
std::optional<KernelSymbols>
name_kernel_addresses(const std::vector<uint64_t> &addrs, std::string *why,
                      const std::vector<uint64_t> &data = {});

// The same, falling back to all of /proc/kallsyms (read through `files`);
// *fallback then says why (else it is empty).
KernelSymbols kernel_symbols_for(const std::vector<uint64_t> &addrs,
                                 const std::vector<uint64_t> &data,
                                 const FileReader &files,
                                 std::string *fallback);

} // namespace offcpu
