// libFuzzer target: the text parsers fed by files other users control or
// that come from the kernel: /proc/PID/maps, perf maps, kallsyms, folded.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "output/flamegraph.h"
#include "output/folded.h"
#include "symbolize/kallsyms.h"
#include "symbolize/perf_map.h"
#include "symbolize/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto maps = offcpu::parse_proc_maps(text);
  for (const auto &m : maps) {
    offcpu::find_mapping(maps, m.start);
    (void)m.display_name();
  }
  auto perf = offcpu::parse_perf_map(text);
  std::vector<uint64_t> wanted;
  for (const auto &p : perf) {
    offcpu::find_perf_symbol(perf, p.start + p.size / 2);
    wanted.push_back(p.start + p.size / 2);
  }
  // The streaming scan over the same text must find what the parser did.
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  int fd = memfd_create("perfmap", MFD_CLOEXEC);
  if (fd >= 0) {
    if (write(fd, data, size) == static_cast<ssize_t>(size)) {
      auto scan = offcpu::scan_perf_map(fd, wanted, size);
      if (scan.names.size() != wanted.size())
        __builtin_trap();
    }
    close(fd);
  }
  auto ks = offcpu::KernelSymbols::parse(text);
  ks.find(0xffffffff81000000);
  ks.find_data(0xffffffff82000000);
  size_t bad = 0;
  auto stacks = offcpu::parse_folded_stacks(text, &bad);
  if (stacks.size() < 2000)
    offcpu::render_flamegraph(stacks, {});
  return 0;
}
