// The model from what the BPF programs collected: every stack named, every
// name valid UTF-8, the tracer's own frames gone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collect/raw_profile.h"
#include "model/profile.h"
#include "symbolize/symbolizer.h"

namespace offcpu {

struct StackSelection {
  bool user = true;
  bool kernel = true;
};

// One sample per aggregation key. A wait already in progress when tracing
// started may have a kernel stack without the scheduler's own frames (see
// OFFCPU_KSTACK_NOSCHED): where the same thread was also seen blocking in
// full on a stack that extends it, it is added to that one, so one wait is
// drawn once.
// `cgroups`: names of the cgroup ids of --per-cgroup keys. Consumes
// raw.counts (each chunk freed once its samples are made): what else needs
// them reads them first.
void add_offcpu_samples(Profile &profile, RawProfile &raw, Symbolizer &sym,
                        StackSelection show,
                        const std::map<uint64_t, std::string> &cgroups = {});

// One wait's thread, stacks and waker (OFFCPU_WAKER_NONE: none), named as
// an aggregation key's are: the timeline's events and their hops.
Sample name_wait(Profile &profile, uint32_t tgid, uint32_t tid,
                 const char *comm, size_t comm_len, uint64_t user_stack,
                 uint64_t kernel_stack, uint64_t waker, const RawProfile &raw,
                 Symbolizer &sym);

// The partial-stack merge of add_offcpu_samples, on its own (tests).
void merge_partial_kernel_stacks(std::vector<Sample> &samples);

// One sample per (thread, stacks, lock, kind), with the lock described.
// `kinds`: offcpu lock's kind names and [lock 0x...] for unnamed locks;
// else offcpu rwsem's read/write and bare addresses.
void add_lock_waits(Profile &profile, const RawLockWaits &raw, Symbolizer &sym,
                    StackSelection show, bool kinds = false);

// "mmap_lock" for the waiter's own mm, else the global symbol holding the
// lock ("sym" or "sym+0x40"), else its address (as "[lock 0x...]" with
// `bracketed`).
std::string describe_lock(uint64_t addr, uint32_t flags,
                          const KernelSymbols &ks, bool bracketed = false);

// True for frames of the BPF/tracing machinery that ran the probe.
bool is_tracer_frame(const std::string &name);

} // namespace offcpu
