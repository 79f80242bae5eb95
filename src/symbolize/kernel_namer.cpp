#include "symbolize/kernel_namer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "offcpu/shared.h"

#include "probe/ksyms_program.h"

namespace offcpu {
namespace {} // namespace

std::optional<KernelSymbols>
name_kernel_addresses(const std::vector<uint64_t> &addrs, std::string *why,
                      const std::vector<uint64_t> &data) {
  constexpr uint64_t kKernelStart = OFFCPU_KERNEL_ADDR_MIN;
  // (address, is data): sorted and unique.
  std::vector<std::pair<uint64_t, bool>> queries;
  queries.reserve(addrs.size() * 2 + data.size());
  for (uint64_t a : addrs) {
    if (a < kKernelStart)
      continue;
    queries.emplace_back(a, false);
    queries.emplace_back(a - 1, false); // return addresses: look up the call
  }
  for (uint64_t a : data)
    if (a >= kKernelStart)
      queries.emplace_back(a, true);
  std::sort(queries.begin(), queries.end());
  queries.erase(std::unique(queries.begin(), queries.end()), queries.end());
  if (queries.empty())
    return KernelSymbols{};

  KsymsProgram skel(ksyms_bpf__open());
  if (!skel) {
    *why =
        std::string("cannot open the naming program: ") + std::strerror(errno);
    return std::nullopt;
  }
  bpf_program__set_autoload(skel->progs.resolve_kernel_text, false);
  if (ksyms_bpf__load(skel.get())) {
    *why = std::string("cannot load the naming program (needs 5.14+): ") +
           std::strerror(errno);
    return std::nullopt;
  }
  std::vector<PrintedSymbol> printed;
  printed.reserve(queries.size());
  int fd = bpf_program__fd(skel->progs.name_kernel_addresses);
  for (size_t at = 0; at < queries.size(); at += OFFCPU_NAME_BATCH) {
    size_t n = std::min<size_t>(OFFCPU_NAME_BATCH, queries.size() - at);
    auto *bss = skel->bss;
    for (size_t i = 0; i < n; i++)
      bss->name_addrs[i] = queries[at + i].first;
    bss->name_count = static_cast<uint32_t>(n);
    std::memset(bss->names, 0, sizeof(bss->names));
    LIBBPF_OPTS(bpf_test_run_opts, run);
    if (bpf_prog_test_run_opts(fd, &run)) {
      *why =
          std::string("cannot run the naming program: ") + std::strerror(errno);
      return std::nullopt;
    }
    for (size_t i = 0; i < n; i++) {
      const char *name = bss->names[i];
      printed.push_back({queries[at + i].first,
                         std::string(name, strnlen(name, OFFCPU_NAME_LEN)),
                         queries[at + i].second});
    }
  }
  return KernelSymbols::from_printed(printed);
}

KernelSymbols kernel_symbols_for(const std::vector<uint64_t> &addrs,
                                 const std::vector<uint64_t> &data,
                                 const FileReader &files,
                                 std::string *fallback) {
  fallback->clear();
  if (auto named = name_kernel_addresses(addrs, fallback, data))
    return std::move(*named);
  // With data symbols: a later batch may hold locks to name.
  return KernelSymbols::load(files, true);
}

} // namespace offcpu
