// libFuzzer target: the text parsers fed by files other users control or
// that come from the kernel: /proc/PID/maps, perf maps, kallsyms, folded.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "output/flamegraph.h"
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
  for (const auto &p : perf)
    offcpu::find_perf_symbol(perf, p.start + p.size / 2);
  auto ks = offcpu::KernelSymbols::parse(text);
  ks.find(0xffffffff81000000);
  ks.find_data(0xffffffff82000000);
  size_t bad = 0;
  auto stacks = offcpu::parse_folded_stacks(text, &bad);
  if (stacks.size() < 2000)
    offcpu::render_flamegraph(stacks, {});
  return 0;
}
