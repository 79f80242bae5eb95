// What the BPF programs are asked to trace and keep: filled from the
// command line by run/, read by the sessions, which know no CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probe/choices.h"
#include "probe/unwind_maps.h"

namespace offcpu {

// Who loads the off-CPU programs: the kernel (light skeleton, nothing
// parsed here) where it can, else libbpf. Forcing one is for tests.
// LightProbeReads: the light skeleton without plain kernel loads (the one
// older kernels get), to compare the two.
enum class Loader { Auto, Light, LightProbeReads, Libbpf };

struct OffcpuConfig {
  std::vector<uint32_t> pids;       // processes: all their threads
  std::vector<uint32_t> tids;       // individual threads
  bool follow_children = false;     // and every process they fork from now on
  std::string name;                 // -n: the process name (main thread's comm)
  std::vector<uint64_t> cgroup_ids; // --cgroup: v2 cgroup ids, and below
  bool per_cgroup = false;          // --per-cgroup: the cgroup in the key
  bool user_threads_only = false;
  bool kernel_threads_only = false;
  bool user_stacks_only = false;
  bool kernel_stacks_only = false;
  uint64_t min_block_us = 1;
  uint64_t max_block_us = UINT64_MAX;
  std::optional<int64_t> state; // BCC --state: a bitmask
  uint32_t state_classes = 0;   // --state by name: offcpu_state_class bits
  bool show_state = false;      // --show-state: a [S]/[D]... frame
  bool wakers = false;          // --wakers: who woke each wait
  bool runqueue = false;        // --runqueue: blocked vs runnable time
  // The timeline (-o x.json, x.perfetto-trace, --top-waits): waits of at
  // least events_min_us sent one by one, with their wakers and chains.
  bool events = false;
  uint64_t events_min_us = 1000;
  // --events-memory: what the events held in user space may take, MiB; the
  // ring buffer gets a sixteenth (timeline_ring_bytes). 128: 1,048,576
  // events, about 1.1 GB at the end with their names and the JSON (1.1 KB
  // an event, README), no more than 64 took before stacks were shared.
  uint32_t events_memory_mib = 128;
  // 0: sized from the machine (see default_stack_storage, map_budget.h).
  uint32_t stack_storage_size = 0;
  uint32_t max_stack_depth = 127;
  uint32_t max_entries = 0; // distinct (thread, stack) keys; 0: as above
  // Of the stack storage and the aggregation map, what only the stop pass
  // may fill (set at start: stop_pass_reserve, map_budget.h).
  uint32_t stack_reserve = 0;
  uint32_t counts_reserve = 0;
  bool verify_kernel_unwind = false; // also take the kernel's walk, compare
  bool verify_stack_reuse = false;   // walk anyway where a stack is reused
  bool no_stack_reuse = false;       // walk every time
  bool time_walks = false;           // user walks timed by cause (-v)
  uint32_t kernel_unwind_limit = 0;  // test knob: splice after N frames
  Loader loader = Loader::Auto;
  // Test knob (--fail-load): the loads named are made to fail in the
  // kernel (a map too large to create), to exercise the fallbacks after
  // them: "split" (its libbpf objects), "light" (plain loads; the split
  // load's maps too), "light-probe-reads", "tp_btf" (libbpf's), "edges"
  // (the window edges' iterators loaded after the attach).
  std::string fail_load; // comma list
  // Test knob (--delay-edges): the edges' iterators, where they load after
  // the attach, load this much later.
  uint32_t edges_delay_ms = 0;
  bool fails_load(const std::string &what) const {
    const std::string list = "," + fail_load + ",";
    return list.find("," + what + ",") != std::string::npos;
  }
  // User stacks: with unwind tables where the kernel allows (src/unwind/),
  // or frame pointers only (--user-unwind fp). Array sizes for the tables.
  bool user_unwind_tables = true;
  uint32_t unwind_memory_mib = 64; // --unwind-memory
  UnwindSizes unwind_sizes;
};

// `offcpu lock` and its preset `offcpu rwsem` (write waits, --read adds
// read waits, of processes by name or PID).
struct RwsemConfig {
  std::string name; // process name (or thread name) to trace
  bool match_thread_name = false;
  std::vector<uint32_t> pids;       // instead of, or as well as, a name
  std::vector<uint32_t> tids;       // offcpu lock -t
  std::vector<uint64_t> cgroup_ids; // offcpu lock --cgroup
  bool follow_children = false;     // offcpu lock --children, -- COMMAND
  bool user_threads_only = false, kernel_threads_only = false;
  bool include_read = false;
  // offcpu lock: the kinds traced (bits of offcpu_lock_kind), and the
  // kind's frame named in full (rwsem:write). 0: the rwsem preset's, write
  // waits and, with include_read, read waits.
  uint32_t lock_kinds = 0;
  uint64_t min_wait_us = 0;
  uint64_t max_wait_us = UINT64_MAX / 1000;
  uint32_t stack_storage_size = 16384;
  uint32_t max_stack_depth = 127;
  uint32_t max_entries = 65536;
  RwsemAttach attach = RwsemAttach::Auto;
  bool wakers = false; // --wakers: the holder's release path
  // offcpu lock: locks in slab objects named by their cache (6.12+).
  bool slab_caches = false;
  bool key_cgroup = false; // offcpu lock --by cgroup: the cgroup in the key
  // User stacks through unwind tables (as OffcpuConfig); their array sizes.
  bool user_unwind_tables = true;
  UnwindSizes unwind_sizes;
};

} // namespace offcpu
