// What the running kernel offers, read from its BTF, and the attach plans
// that follow from it. Probing is separate from choosing so the choice is a
// pure function that unit tests drive with made-up kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offcpu/shared.h"
#include "probe/choices.h"

namespace offcpu {

struct KernelFeatures {
  bool btf = false;                     // /sys/kernel/btf/vmlinux (CO-RE)
  bool tp_btf_sched_switch = false;     // BTF-enabled tracepoints, 5.5+
  bool sched_switch_prev_state = false; // prev_state argument, 5.18+
  bool task_storage = false;            // BPF_MAP_TYPE_TASK_STORAGE, 5.11+
  bool get_task_stack = false;          // bpf_get_task_stack, 5.9+
  bool task_iter = false;               // iter/task, 5.8+
  bool user_walk_current =
      false; // get_current_task_btf 5.11 + task_pt_regs 5.15
  bool user_walk_other_task =
      false;             // task_pt_regs 5.15 + copy_from_user_task 5.18
  bool kprobes = false;  // CONFIG_KPROBES (kprobe_events present)
  bool bpf_loop = false; // bpf_loop helper, 5.17+
  bool ringbuf = false;  // BPF_MAP_TYPE_RINGBUF, 5.8+
  bool find_vma = false; // bpf_find_vma, 5.17+
  // The bpf_rdonly_cast kfunc (6.2+: kernel memory by guarded plain loads),
  // on 6.8+ (the object that uses it tags a global function's argument).
  bool rdonly_cast = false;
  // Where the kernel maps all of RAM and its page tables' depth, found in
  // the kernel (x86-64, with bpf_rdonly_cast); 0: unknown.
  uint64_t direct_map_base = 0;
  uint32_t page_table_levels = 0;
  // task_struct.sched_info.last_queued (CONFIG_SCHED_INFO, on in
  // distribution kernels): when a runnable task was queued, kept by the
  // scheduler until it runs.
  bool sched_info = false;
  // What the ORC kernel-stack walker needs (x86-64 ORC kernels, 5.16+);
  // kernel_text_missing says why when it is absent.
  std::optional<offcpu_kernel_text> kernel_text;
  std::string kernel_text_missing;
};

// Reads /sys/kernel/btf/vmlinux; all false when the kernel has no BTF.
KernelFeatures probe_kernel_features();

// How the off-CPU programs are attached and where they keep state.
struct OffcpuPlan {
  bool tp_btf = true; // else raw_tp/sched_switch
  // Kernel stacks walked with the ORC walker at switch-in, after -m/-M;
  // else the kernel walks them at every switch-out.
  bool kstack_at_switch_in = false;
  offcpu_kernel_text kernel_text{}; // for the walker
  bool task_storage = true;         // else a tid-keyed hash map
  bool user_fp_walk = true;       // own frame-pointer walk, else bpf_get_stack
  bool bpf_loop = true;           // loops through bpf_loop: fast verification
  bool announce_processes = true; // ring buffer of newly seen processes
  bool prev_state_arg = true;     // else read task->__state / ->state
  bool seed_open_waits = true;    // iterator opens waits at attach time
  bool seed_user_stacks = true;   // and a sleepable one walks their user stacks
  bool flush_open_waits = true;   // iterator charges open waits at stop
  // The last two iterators verified on a thread of their own once the hooks
  // are attached (collect/edge_loader.h); set by the loader, not the probes.
  bool edges_after_attach = false;
  // --runqueue reads when the task was queued from the scheduler at
  // switch-in, with no sched_waking hook (still needed by --wakers).
  bool runq_from_sched_info = false;
  // User stacks walked with unwind tables from the files' CFI (bpf_loop,
  // tp_btf, ring buffer); waits walked before the tables were ready are
  // walked again while blocked when seed_user_stacks is possible.
  bool user_unwind_tables = true;
  // A process not installed yet is walked through its files' tables, its
  // mappings from bpf_find_vma (tp_btf plans, 5.17+).
  bool find_vma = false;
  // Kernel memory read by plain loads rather than probe reads (the light
  // object built for it, 6.8+).
  bool direct_loads = false;
  // And with them, user stack words read through the page tables there.
  uint64_t direct_map_base = 0;
  uint32_t page_table_levels = 0;
  std::string describe() const;
};

// Plans to try, best first; loading falls back along the list.
// Throws FatalError when --kernel-unwind orc is asked for and impossible.
std::vector<OffcpuPlan> offcpu_plans(const KernelFeatures &features,
                                     AttachChoice choice,
                                     KernelUnwind unwind = KernelUnwind::Auto);

std::string describe_features(const KernelFeatures &features);

// What `offcpu rwsem` can hook on this kernel.
struct RwsemFeatures {
  bool btf = false;
  // Slow-path functions that exist, newest name first; empty if none.
  std::string write_slowpath; // rwsem_down_write_slowpath (4.20+) or _failed
  std::string read_slowpath;
  std::string mutex_slowpath;  // __mutex_lock_slowpath, where not inlined
  bool mutex_btf = false;      // ... and with BTF (fentry possible)
  bool fentry_targets = false; // the slow paths have BTF (fentry possible)
  bool kprobes = false;        // the perf kprobe PMU exists
  bool down_write = false;     // down_write exists (last-resort kprobe)
  bool contention_tracepoints = false; // lock:contention_begin/end, 5.19+
  // Locks named by their slab cache (6.12+): the bpf_get_kmem_cache kfunc
  // and the kmem_cache iterator that names the caches.
  bool slab_caches = false;
  // Task storage and bpf_get_current_task_btf (5.11+): waits' starts there.
  bool task_storage = false;
  bool user_walk_current = false;
  bool bpf_loop = false;
  // The kernel's direct map and page-table depth (as KernelFeatures'):
  // the object with plain loads then checks user stack memos through the
  // page tables, not by a probe read of user memory; 0: unknown.
  uint64_t direct_map_base = 0;
  uint32_t page_table_levels = 0;
};

RwsemFeatures probe_rwsem_features();

struct RwsemPlan {
  RwsemAttach mechanism = RwsemAttach::Tracepoint;
  std::string write_target; // function for fentry/kprobe
  std::string read_target;  // may be empty: no read-side waits
  // offcpu lock before 5.19: the mutex slow path (empty: no mutex waits).
  std::string mutex_target;
  // down_write itself: also sees uncontended acquisitions, so waits shorter
  // than a microsecond are dropped.
  bool entry_point_only = false;
  bool user_fp_walk = true;
  bool bpf_loop = true;
  // Waits' starts in task storage (BTF programs, 5.11+), else a hash map.
  bool task_storage = false;
  // The object with plain loads (6.8+), user stacks read through the page
  // tables at direct_map_base; else the one with probe reads.
  bool direct_loads = false;
  uint64_t direct_map_base = 0;
  uint32_t page_table_levels = 0;
  std::string describe() const;

private:
  std::string describe_mechanism() const;
};

// Best first. An explicit choice yields that plan only, or none. With
// `all_kinds` (offcpu lock) the tracepoints come first: only they see every
// kind; the slow-path probes are then the fallback for kernels before 5.19.
std::vector<RwsemPlan> rwsem_plans(const RwsemFeatures &f, RwsemAttach choice,
                                   bool all_kinds = false);

} // namespace offcpu
