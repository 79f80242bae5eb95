#include "probe/features.h"

#include <linux/btf.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>

#include <memory>

#include "probe/direct_map_light.h"
#include "probe/kernel_btf.h"
#include "probe/kernel_text.h"
#include "util/error.h"
#include "util/fs.h"

namespace offcpu {
namespace {

bool has_member(const KernelBtf &b, const char *struct_name,
                const char *member) {
  for (const KernelBtf::Member &m :
       b.members(b.find(struct_name, BTF_KIND_STRUCT)))
    if (m.name == member)
      return true;
  return false;
}

} // namespace

namespace {

// The running kernel's version is at least major.minor (uname).
bool kernel_at_least(int major, int minor) {
  struct utsname u;
  int ma = 0, mi = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
    return false;
  return ma > major || (ma == major && mi >= minor);
}

} // namespace

KernelFeatures probe_kernel_features() {
  KernelFeatures f;
  std::unique_ptr<KernelBtf> b = KernelBtf::load_vmlinux();
  if (!b)
    return f;
  f.btf = true;
  // Parameters of the tracepoint's BTF prototype, including its void *data.
  int params = b->typedef_proto_params("btf_trace_sched_switch");
  f.tp_btf_sched_switch = params >= 4;
  f.sched_switch_prev_state = params >= 5;
  f.task_storage = b->enum_has("bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE");
  f.get_task_stack = b->enum_has("bpf_func_id", "BPF_FUNC_get_task_stack");
  f.task_iter = b->find("bpf_iter__task", BTF_KIND_STRUCT) >= 0;
  f.user_walk_current =
      b->enum_has("bpf_func_id", "BPF_FUNC_get_current_task_btf") &&
      b->enum_has("bpf_func_id", "BPF_FUNC_task_pt_regs");
  f.user_walk_other_task =
      b->enum_has("bpf_func_id", "BPF_FUNC_task_pt_regs") &&
      b->enum_has("bpf_func_id", "BPF_FUNC_copy_from_user_task");
  f.bpf_loop = b->enum_has("bpf_func_id", "BPF_FUNC_loop");
  f.ringbuf = b->enum_has("bpf_map_type", "BPF_MAP_TYPE_RINGBUF");
  f.find_vma = b->enum_has("bpf_func_id", "BPF_FUNC_find_vma");
  // The object with plain loads also tags a global function's argument as
  // trusted (6.8+); older kernels with the kfunc get the other object.
  f.rdonly_cast =
      b->find("bpf_rdonly_cast", BTF_KIND_FUNC) >= 0 && kernel_at_least(6, 8);
#if defined(__x86_64__)
  // The page-table walk knows x86-64's layout. Not found: memory
  // encryption, or no bpf_get_current_task_btf for the search program.
  if (f.rdonly_cast &&
      offcpu_find_direct_map(&f.direct_map_base, &f.page_table_levels) != 0)
    f.direct_map_base = f.page_table_levels = 0;
#endif
  f.sched_info = has_member(*b, "sched_info", "last_queued") &&
                 has_member(*b, "task_struct", "sched_info");
  // Only where the walker could be used: it needs tp_btf, bpf_loop and
  // task storage too (see offcpu_plans).
  if (f.tp_btf_sched_switch && f.bpf_loop && f.task_storage && f.get_task_stack)
    f.kernel_text = probe_kernel_text(b.get(), &f.kernel_text_missing);
  else
    f.kernel_text_missing = "needs tp_btf, bpf_loop, task storage and "
                            "bpf_get_task_stack";
  f.kprobes = access("/sys/kernel/tracing/kprobe_events", F_OK) == 0 ||
              access("/sys/kernel/debug/tracing/kprobe_events", F_OK) == 0 ||
              access("/sys/bus/event_source/devices/kprobe", F_OK) == 0;
  return f;
}

std::vector<OffcpuPlan> offcpu_plans(const KernelFeatures &f,
                                     AttachChoice choice, KernelUnwind unwind) {
  std::vector<OffcpuPlan> plans;
  bool orc = f.kernel_text && f.tp_btf_sched_switch && f.bpf_loop &&
             f.task_storage && f.get_task_stack &&
             choice != AttachChoice::RawTp;
  if (unwind == KernelUnwind::Orc && !orc)
    throw runtime_error("--kernel-unwind orc is not possible on this kernel: " +
                        (choice == AttachChoice::RawTp
                             ? std::string("it needs tp_btf")
                             : f.kernel_text_missing));
  // tp_btf: typed, trusted pointers; task storage and bpf_get_task_stack
  // need those, so they are only used with it.
  if (f.tp_btf_sched_switch && choice != AttachChoice::RawTp) {
    OffcpuPlan p;
    p.tp_btf = true;
    p.prev_state_arg = f.sched_switch_prev_state;
    p.task_storage = f.task_storage;
    p.user_fp_walk = f.user_walk_current;
    p.bpf_loop = f.bpf_loop;
    p.announce_processes = f.ringbuf;
    // The ORC walk at switch-in costs a fraction of the kernel's walk at
    // switch-out and runs only for waits that pass the filters. Kernels
    // without it (frame-pointer unwinder, non-x86, before 5.16) walk at
    // switch-out: bpf_get_task_stack() could walk later too, but it drops
    // the __sched frames (schedule, mutex_lock, down_write...).
    p.kstack_at_switch_in = orc && unwind != KernelUnwind::SwitchOut;
    // Also where wakeups come from interrupts (--wakers).
    if (f.kernel_text)
      p.kernel_text = *f.kernel_text;
    p.seed_open_waits = f.task_iter && f.get_task_stack;
    p.seed_user_stacks = p.seed_open_waits && f.user_walk_other_task;
    p.flush_open_waits = f.task_iter;
    p.runq_from_sched_info = f.sched_info;
    // The table walk runs in bpf_loop (5.17+) from the task's saved user
    // registers (5.15+); older kernels walk frame pointers only.
    p.user_unwind_tables = p.user_fp_walk && f.bpf_loop && f.ringbuf;
    p.find_vma = f.find_vma;
    p.direct_loads = f.rdonly_cast;
    p.direct_map_base = f.direct_map_base;
    p.page_table_levels = f.page_table_levels;
    plans.push_back(p);
  }
  // raw_tp: kernels with BTF but no working tp_btf (5.4, or tp_btf refused).
  // Stacks at switch-out, start times in a hash map.
  if (choice != AttachChoice::TpBtf) {
    OffcpuPlan p;
    p.tp_btf = false;
    p.prev_state_arg = f.sched_switch_prev_state;
    p.task_storage = false;
    p.user_fp_walk = false;
    // Old kernels have no bpf_loop; this plan runs the bounded loops, so
    // they stay tested on new kernels too.
    p.bpf_loop = false;
    p.announce_processes = f.ringbuf;
    p.kstack_at_switch_in = false;
    p.seed_open_waits = f.task_iter && f.get_task_stack;
    p.seed_user_stacks = p.seed_open_waits && f.user_walk_other_task;
    p.flush_open_waits = f.task_iter;
    p.runq_from_sched_info = f.sched_info;
    p.user_unwind_tables = false; // its walk is bpf_get_stack's
    plans.push_back(p);
  }
  return plans;
}

std::string OffcpuPlan::describe() const {
  std::string s = tp_btf ? "tp_btf/sched_switch" : "raw_tp/sched_switch";
  s += prev_state_arg ? ", state from prev_state" : ", state from task";
  s += kstack_at_switch_in ? ", kernel stacks by ORC walk at switch-in"
                           : ", kernel stacks at switch-out";
  s += user_unwind_tables ? ", user stacks by unwind tables (frame pointers "
                            "where none)"
       : user_fp_walk     ? ", user stacks by frame-pointer walk"
                          : ", user stacks by bpf_get_stack";
  s += bpf_loop ? ", bpf_loop" : ", bounded loops";
  if (direct_loads)
    s += direct_map_base ? ", kernel memory by plain loads (user stacks "
                           "checked through the page tables)"
                         : ", kernel memory by plain loads";
  s += announce_processes ? ", new processes announced"
                          : ", exited processes not named (no ring buffer)";
  s += task_storage ? ", start times in task storage"
                    : ", start times in a hash map";
  s += seed_open_waits ? (seed_user_stacks
                              ? ", waits open at start seeded"
                              : ", waits open at start seeded (no user stacks)")
                       : ", waits open at start missed (no task iterator)";
  s += flush_open_waits ? ", waits open at stop charged"
                        : ", waits open at stop dropped (no task iterator)";
  if (edges_after_attach)
    s += " (the programs of the window's edges verified after the attach)";
  return s;
}

std::string describe_features(const KernelFeatures &f) {
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  std::string s;
  s += std::string("BTF ") + yn(f.btf);
  s += std::string(", tp_btf ") + yn(f.tp_btf_sched_switch);
  s += std::string(", prev_state ") + yn(f.sched_switch_prev_state);
  s += std::string(", task storage ") + yn(f.task_storage);
  s += std::string(", get_task_stack ") + yn(f.get_task_stack);
  s += std::string(", task iterator ") + yn(f.task_iter);
  s += std::string(", sched_info ") + yn(f.sched_info);
  s += std::string(", user walk ") + yn(f.user_walk_current);
  s += std::string(", cross-task user walk ") + yn(f.user_walk_other_task);
  s += std::string(", kprobes ") + yn(f.kprobes);
  s += std::string(", bpf_loop ") + yn(f.bpf_loop);
  s += std::string(", rdonly_cast ") + yn(f.rdonly_cast);
  s += std::string(", direct map ") +
       (f.direct_map_base ? std::to_string(f.page_table_levels) + " levels"
                          : std::string("unknown"));
  s += std::string(", ORC walker ") +
       (f.kernel_text ? std::string("yes")
                      : "no (" + f.kernel_text_missing + ")");
  return s;
}

namespace {

bool kallsyms_has(const std::string &text, const std::string &name) {
  // Lines end in " name\n" or " name\t[module]\n".
  return text.find(" " + name + "\n") != std::string::npos;
}

} // namespace

RwsemFeatures probe_rwsem_features() {
  RwsemFeatures f;
  std::unique_ptr<KernelBtf> b = KernelBtf::load_vmlinux();
  // A function is there if BTF describes it; else /proc/kallsyms (~50 ms of
  // kernel time to format) decides, read only if needed.
  std::optional<std::string> kallsyms;
  auto exists = [&](const char *name) {
    if (b && b->find(name, BTF_KIND_FUNC) >= 0)
      return true;
    if (!kallsyms) {
      auto text = system_files().read("/proc/kallsyms", 256u << 20);
      kallsyms = text ? *text : std::string();
    }
    return kallsyms_has(*kallsyms, name);
  };
  // 4.20 renamed rwsem_down_write_failed to rwsem_down_write_slowpath.
  for (const char *name :
       {"rwsem_down_write_slowpath", "rwsem_down_write_failed"})
    if (f.write_slowpath.empty() && exists(name))
      f.write_slowpath = name;
  for (const char *name :
       {"rwsem_down_read_slowpath", "rwsem_down_read_failed"})
    if (f.read_slowpath.empty() && exists(name))
      f.read_slowpath = name;
  f.down_write = exists("down_write");
  if (exists("__mutex_lock_slowpath"))
    f.mutex_slowpath = "__mutex_lock_slowpath";
  f.kprobes = access("/sys/bus/event_source/devices/kprobe", F_OK) == 0;
  if (b) {
    f.btf = true;
    f.mutex_btf = !f.mutex_slowpath.empty() &&
                  b->find(f.mutex_slowpath, BTF_KIND_FUNC) >= 0;
    f.fentry_targets = !f.write_slowpath.empty() &&
                       b->find(f.write_slowpath, BTF_KIND_FUNC) >= 0;
    f.contention_tracepoints =
        b->typedef_proto_params("btf_trace_contention_begin") >= 3 &&
        b->typedef_proto_params("btf_trace_contention_end") >= 3;
    f.user_walk_current =
        b->enum_has("bpf_func_id", "BPF_FUNC_get_current_task_btf") &&
        b->enum_has("bpf_func_id", "BPF_FUNC_task_pt_regs");
    f.bpf_loop = b->enum_has("bpf_func_id", "BPF_FUNC_loop");
    f.task_storage =
        b->enum_has("bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE") &&
        b->enum_has("bpf_func_id", "BPF_FUNC_get_current_task_btf");
    f.slab_caches = b->find("bpf_get_kmem_cache", BTF_KIND_FUNC) >= 0 &&
                    b->find("bpf_iter__kmem_cache", BTF_KIND_STRUCT) >= 0;
#if defined(__x86_64__)
    // As probe_kernel_features: the kfunc, and 6.8+ for the argument tags.
    if (b->find("bpf_rdonly_cast", BTF_KIND_FUNC) >= 0 &&
        kernel_at_least(6, 8) &&
        offcpu_find_direct_map(&f.direct_map_base, &f.page_table_levels) != 0)
      f.direct_map_base = f.page_table_levels = 0;
#endif
  }
  return f;
}

std::vector<RwsemPlan> rwsem_plans(const RwsemFeatures &f, RwsemAttach choice,
                                   bool all_kinds) {
  std::vector<RwsemPlan> plans;
  auto wanted = [&](RwsemAttach m) {
    return choice == RwsemAttach::Auto || choice == m;
  };
  // fentry/fexit: cheapest probes, exact slow-path entry and exit (5.5+;
  // refused under some lockdown setups, hence the fallbacks).
  if (wanted(RwsemAttach::Fentry) && f.fentry_targets) {
    RwsemPlan p;
    p.mechanism = RwsemAttach::Fentry;
    p.write_target = f.write_slowpath;
    p.read_target = f.read_slowpath;
    if (all_kinds && f.mutex_btf)
      p.mutex_target = f.mutex_slowpath;
    p.user_fp_walk = f.user_walk_current;
    p.bpf_loop = f.bpf_loop;
    p.task_storage = f.task_storage;
    plans.push_back(p);
  }
  // kprobes: every kernel built with CONFIG_KPROBES. The slow path if it
  // exists (not inlined), else down_write itself.
  if (wanted(RwsemAttach::Kprobe) && f.kprobes &&
      (!f.write_slowpath.empty() || f.down_write)) {
    RwsemPlan p;
    p.mechanism = RwsemAttach::Kprobe;
    p.write_target = f.write_slowpath.empty() ? "down_write" : f.write_slowpath;
    p.read_target = f.write_slowpath.empty() ? "" : f.read_slowpath;
    p.entry_point_only = f.write_slowpath.empty();
    if (all_kinds)
      p.mutex_target = f.mutex_slowpath;
    p.user_fp_walk = false; // no BTF task pointer in kprobe programs
    p.bpf_loop = f.bpf_loop;
    plans.push_back(p);
  }
  // The lock tracepoints (5.19+): no kprobes or trampolines needed.
  if (wanted(RwsemAttach::Tracepoint) && f.contention_tracepoints) {
    RwsemPlan p;
    p.mechanism = RwsemAttach::Tracepoint;
    p.user_fp_walk = f.user_walk_current;
    p.bpf_loop = f.bpf_loop;
    p.task_storage = f.task_storage;
    plans.insert(all_kinds ? plans.begin() : plans.end(), p);
  }
  // Each plan that walks user stacks from the task's registers is tried
  // first with plain loads where the kernel has them: a memo's check is
  // then a few loads through the page tables, not a probe read of user
  // memory (~200 ns here) at every wait.
  if (f.direct_map_base)
    for (size_t i = 0; i < plans.size(); i++) {
      if (!plans[i].user_fp_walk || !plans[i].bpf_loop)
        continue;
      RwsemPlan d = plans[i];
      d.direct_loads = true;
      d.direct_map_base = f.direct_map_base;
      d.page_table_levels = f.page_table_levels;
      plans.insert(plans.begin() + i, d);
      i++;
    }
  return plans;
}

std::string RwsemPlan::describe() const {
  return describe_mechanism() +
         (direct_loads ? " (kernel memory by plain loads)" : "");
}

std::string RwsemPlan::describe_mechanism() const {
  switch (mechanism) {
  case RwsemAttach::Fentry:
    return "fentry/fexit on " + write_target +
           (read_target.empty() ? "" : " and " + read_target) +
           (mutex_target.empty() ? "" : " and " + mutex_target);
  case RwsemAttach::Kprobe:
    return "kprobe/kretprobe on " + write_target +
           (read_target.empty() ? "" : " and " + read_target) +
           (mutex_target.empty() ? "" : " and " + mutex_target) +
           (entry_point_only ? " (uncontended calls too; waits < 1 us dropped)"
                             : "");
  default:
    return "tp_btf lock:contention_begin/contention_end";
  }
}

} // namespace offcpu
