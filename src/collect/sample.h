// A symbolized off-CPU sample: one (thread, user stack, kernel stack) with
// its total time. The model every output format reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collect/raw_profile.h"
#include "symbolize/symbolizer.h"

namespace offcpu {

struct Sample {
  uint32_t tgid = 0;
  uint32_t pid = 0;
  std::string comm;
  std::vector<std::string> user;   // root first
  std::vector<std::string> kernel; // root first
  // Where each frame's code lives, parallel to user/kernel when filled in
  // by symbolization (pprof mappings); may be empty.
  std::vector<const ModuleInfo *> user_modules;
  std::vector<const ModuleInfo *> kernel_modules;
  bool user_missed = false; // a user stack was wanted but not taken
  bool kernel_missed = false;
  bool kernel_nosched = false; // kernel stack lacks the __sched frames
  uint64_t total_ns = 0;
  uint64_t count = 0;
};

struct StackSelection {
  bool user = true;
  bool kernel = true;
};

// Frame names, root first. Kernel stacks lose the tracer's own leaf frames.
std::vector<std::string>
name_kernel_stack(const std::vector<uint64_t> &ips, Symbolizer &sym,
                  std::vector<const ModuleInfo *> *modules = nullptr);
std::vector<std::string>
name_user_stack(uint32_t tgid, uint64_t stack_id,
                const std::vector<uint64_t> &ips, Symbolizer &sym,
                std::vector<const ModuleInfo *> *modules = nullptr);

// Looks a stack id up; null for OFFCPU_NO_STACK, a missed or a lost stack.
const std::vector<uint64_t> *find_stack(const StackTable &stacks, uint64_t id);

// Fills s.user/s.kernel (and their modules, or the missed flags) from the
// two stack ids of an aggregation key.
void name_sample_stacks(Sample &s, uint64_t user_stack, uint64_t kernel_stack,
                        const StackTable &stacks, Symbolizer &sym,
                        StackSelection show);

// Names every frame; drops the tracer's own leaf frames from kernel stacks.
std::vector<Sample> symbolize_profile(const RawProfile &raw, Symbolizer &sym,
                                      StackSelection show);

// A wait already in progress when tracing started has a kernel stack
// without the scheduler's own frames (see OFFCPU_KSTACK_NOSCHED). Where the
// same thread was also seen blocking in full on a stack that extends it, the
// partial sample is added to that one, so one wait is drawn once.
void merge_partial_kernel_stacks(std::vector<Sample> &samples);

// True for frames of the BPF/tracing machinery that ran the probe.
bool is_tracer_frame(const std::string &name);

} // namespace offcpu
