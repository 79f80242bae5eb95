#include "symbolize/kernel_namer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "offcpu/shared.h"

#include "ksyms.skel.h"

namespace offcpu {
namespace {

struct KsymsDeleter {
  void operator()(ksyms_bpf *s) const { ksyms_bpf__destroy(s); }
};

} // namespace

std::optional<KernelSymbols>
name_kernel_addresses(const std::vector<uint64_t> &addrs, std::string *why) {
  std::vector<uint64_t> queries;
  queries.reserve(addrs.size() * 2);
  for (uint64_t a : addrs) {
    if (a < 0xffff800000000000ULL) // not a kernel address
      continue;
    queries.push_back(a);
    queries.push_back(a - 1); // return addresses are looked up at the call
  }
  std::sort(queries.begin(), queries.end());
  queries.erase(std::unique(queries.begin(), queries.end()), queries.end());
  if (queries.empty())
    return KernelSymbols{};

  std::unique_ptr<ksyms_bpf, KsymsDeleter> skel(ksyms_bpf__open());
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
  std::vector<std::pair<uint64_t, std::string>> printed;
  printed.reserve(queries.size());
  int fd = bpf_program__fd(skel->progs.name_kernel_addresses);
  for (size_t at = 0; at < queries.size(); at += OFFCPU_NAME_BATCH) {
    size_t n = std::min<size_t>(OFFCPU_NAME_BATCH, queries.size() - at);
    auto *bss = skel->bss;
    std::copy_n(queries.begin() + static_cast<long>(at), n, bss->name_addrs);
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
      printed.emplace_back(queries[at + i],
                           std::string(name, strnlen(name, OFFCPU_NAME_LEN)));
    }
  }
  return KernelSymbols::from_printed(printed);
}

} // namespace offcpu
