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

// Symbols holding `addrs` (and addr - 1, for return addresses); nullopt with
// the reason in *why when the kernel cannot run the namer.
std::optional<KernelSymbols>
name_kernel_addresses(const std::vector<uint64_t> &addrs, std::string *why);

} // namespace offcpu
