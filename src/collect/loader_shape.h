// Reads the loader program libbpf 1.1's gen_loader writes (what light
// skeletons are built from) for the places generated_loader.cpp rewrites:
// where it creates each map, where it writes a data map's initial value,
// and whether every system call it makes is one the rewrite allows.
// Matched instruction by instruction, so that a loader of another shape is
// told apart and loaded by libbpf instead, never rewritten wrongly.
#pragma once

#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace offcpu {

// A map-creating call in the loader:
//   r1 = BPF_MAP_CREATE; r2 = &data[attr]; r3 = size; call sys_bpf; r7 = r0
//   if r7 < 0 goto clean-up; r1 = &data[slot]; *(u32 *)r1 = r7
// (data: the loader's one map, the blob libbpf wrote; slot: the map's in
// fd_array, the data's first words).
struct CreateCall {
  size_t call;   // the call instruction's index
  uint32_t attr; // the attr's offset in the data
  int32_t slot;  // where the descriptor is stored, in the data
};

// Every map-creating call, in order.
std::vector<CreateCall> find_creates(const std::vector<bpf_insn> &insns);

// The call that writes the initial value of the data map in fd_array's
// `slot`; 0 where there is not exactly one.
size_t find_update(const std::vector<bpf_insn> &insns, int32_t slot);

// Whether every system call left in a rewritten loader is one it may make:
// loading the object's BTF and its programs, writing and freezing the maps
// `own` marks (by fd_array slot index), and the map creation at
// `fail_call` (SIZE_MAX: none).
bool only_allowed_calls(const std::vector<bpf_insn> &insns,
                        const std::vector<bool> &own, size_t fail_call);

} // namespace offcpu
