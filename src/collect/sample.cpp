#include "collect/sample.h"

#include <algorithm>
#include <cstring>

#include "util/utf8.h"

namespace offcpu {

bool is_tracer_frame(const std::string &name) {
  static const char *const prefixes[] = {
      "bpf_prog_",        "bpf_trace_run",   "__bpf_trace_",
      "__traceiter_",     "perf_trace_",     "trace_call_bpf",
      "bpf_get_stack",    "__bpf_get_stack", "bpf_get_stackid",
      "__bpf_prog_enter", "__bpf_prog_exit", "bpf_trampoline_"};
  for (const char *p : prefixes)
    if (name.compare(0, std::strlen(p), p) == 0)
      return true;
  return false;
}

const std::vector<uint64_t> *find_stack(const StackTable &stacks, uint64_t id) {
  auto it = stacks.find(id);
  return it == stacks.end() ? nullptr : &it->second;
}

std::vector<std::string>
name_kernel_stack(const std::vector<uint64_t> &ips, Symbolizer &sym,
                  std::vector<const ModuleInfo *> *modules) {
  std::vector<std::string> leaf_first;
  std::vector<const ModuleInfo *> mods;
  leaf_first.reserve(ips.size());
  for (size_t i = 0; i < ips.size(); i++) {
    const ModuleInfo *m = nullptr;
    leaf_first.push_back(valid_utf8(sym.kernel_frame(ips[i], i > 0, &m)));
    mods.push_back(m);
  }
  // Stacks taken inside the tracepoint begin with the tracer's frames;
  // everything up to the last of them (within the first few) is ours.
  size_t cut = 0;
  for (size_t i = 0; i < leaf_first.size() && i < 16; i++)
    if (is_tracer_frame(leaf_first[i]))
      cut = i + 1;
  leaf_first.erase(leaf_first.begin(),
                   leaf_first.begin() + static_cast<long>(cut));
  mods.erase(mods.begin(), mods.begin() + static_cast<long>(cut));
  std::reverse(leaf_first.begin(), leaf_first.end());
  std::reverse(mods.begin(), mods.end());
  if (modules)
    *modules = std::move(mods);
  return leaf_first;
}

std::vector<std::string>
name_user_stack(uint32_t tgid, uint64_t stack_id,
                const std::vector<uint64_t> &ips, Symbolizer &sym,
                std::vector<const ModuleInfo *> *modules) {
  std::vector<std::string> root_first;
  root_first.reserve(ips.size());
  if (modules)
    modules->clear();
  sym.select_stack(tgid, stack_id);
  for (size_t i = ips.size(); i-- > 0;) {
    const ModuleInfo *m = nullptr;
    root_first.push_back(valid_utf8(sym.user_frame(tgid, ips[i], i > 0, &m)));
    if (modules)
      modules->push_back(m);
  }
  return root_first;
}

void name_sample_stacks(Sample &s, uint64_t user_stack, uint64_t kernel_stack,
                        const StackTable &stacks, Symbolizer &sym,
                        StackSelection show) {
  if (show.user && user_stack != OFFCPU_NO_STACK) {
    if (const auto *ips = find_stack(stacks, user_stack))
      s.user = name_user_stack(s.tgid, user_stack, *ips, sym, &s.user_modules);
    else
      s.user_missed = true;
  }
  if (show.kernel && kernel_stack != OFFCPU_NO_STACK) {
    if (const auto *ips = find_stack(stacks, kernel_stack))
      s.kernel = name_kernel_stack(*ips, sym, &s.kernel_modules);
    else
      s.kernel_missed = true;
  }
}

std::vector<Sample> symbolize_profile(const RawProfile &raw, Symbolizer &sym,
                                      StackSelection show) {
  if (show.user)
    for (const auto &kv : raw.counts)
      if (const auto *ips = find_stack(raw.stacks, kv.first.user_stack))
        sym.expect_user_stack(kv.first.tgid, kv.first.user_stack, *ips);
  std::vector<Sample> out;
  out.reserve(raw.counts.size());
  for (const auto &[key, val] : raw.counts) {
    Sample s;
    s.tgid = key.tgid;
    s.pid = key.pid;
    s.comm = valid_utf8({key.comm, strnlen(key.comm, sizeof(key.comm))});
    s.total_ns = val.total_ns;
    s.count = val.count;
    s.kernel_nosched = key.flags & OFFCPU_KSTACK_NOSCHED;
    name_sample_stacks(s, key.user_stack, key.kernel_stack, raw.stacks, sym,
                       show);
    out.push_back(std::move(s));
  }
  return out;
}

void merge_partial_kernel_stacks(std::vector<Sample> &samples) {
  std::vector<bool> gone(samples.size(), false);
  for (size_t i = 0; i < samples.size(); i++) {
    const Sample &part = samples[i];
    if (!part.kernel_nosched || part.kernel.empty())
      continue;
    size_t best = samples.size();
    for (size_t j = 0; j < samples.size(); j++) {
      const Sample &full = samples[j];
      if (j == i || gone[j] || full.kernel_nosched || full.pid != part.pid ||
          full.tgid != part.tgid || full.comm != part.comm ||
          full.user != part.user || full.user_missed != part.user_missed ||
          full.kernel.size() <= part.kernel.size() ||
          !std::equal(part.kernel.begin(), part.kernel.end(),
                      full.kernel.begin()))
        continue;
      if (best == samples.size() || full.total_ns > samples[best].total_ns)
        best = j;
    }
    if (best == samples.size())
      continue;
    samples[best].total_ns += part.total_ns;
    samples[best].count += part.count;
    gone[i] = true;
  }
  size_t out = 0;
  for (size_t i = 0; i < samples.size(); i++) {
    if (gone[i])
      continue;
    if (out != i) // self-move would empty the sample
      samples[out] = std::move(samples[i]);
    out++;
  }
  samples.resize(out);
}

} // namespace offcpu
