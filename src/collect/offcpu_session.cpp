#include "collect/offcpu_session.h"

#include <bpf/bpf.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>

#include "collect/bpf_setup.h"
#include "collect/edge_loader.h"
#include "collect/light_loader.h"
#include "collect/load_fallback.h"
#include "offcpu.skel.h"
#include "util/error.h"
#include "util/messages.h"
#include "util/signals.h"

namespace offcpu {

void OffcpuSession::add_process(uint32_t tgid) {
  fill_id_set(h_.fd.filter_tgids, {tgid});
}

namespace {

// One line that says why loading failed and what to do about it.
std::string load_failure(int err) {
  err = err < 0 ? -err : err;
  if (err == EPERM || err == EACCES)
    return "loading BPF programs was refused (" + errno_text(err) +
           "): run as root, or with CAP_BPF and CAP_PERFMON; kernel lockdown "
           "or kernel.unprivileged_bpf_disabled can also forbid it";
  if (err == E2BIG || err == ENOMEM)
    return "loading BPF programs failed (" + errno_text(err) +
           "): not enough locked memory or map space; try a smaller "
           "--stack-storage-size or --max-entries";
  return "loading BPF programs failed: " + errno_text(err) +
         " (run with -v for the verifier log)";
}

// The sched_waking hook: who woke a wait (--wakers), or when, for the run
// queue split on kernels whose scheduler does not keep it (sched_info).
bool wants_waking_hook(const OffcpuConfig &o, const OffcpuPlan &p) {
  return o.wakers || o.events || (o.runqueue && !p.runq_from_sched_info);
}

using Rodata = std::remove_pointer_t<decltype(offcpu_bpf::rodata)>;
using Bss = std::remove_pointer_t<decltype(offcpu_bpf::bss)>;

// The settings of this run (include/offcpu/settings.h).
offcpu_settings settings_for(const OffcpuConfig &o, const OffcpuPlan &p) {
  offcpu_settings s = default_settings();
  // With children followed, processes join the filter while tracing.
  s.filter_tgid = !o.pids.empty() || o.follow_children;
  s.filter_tid = !o.tids.empty();
  s.user_threads_only = o.user_threads_only;
  s.kernel_threads_only = o.kernel_threads_only;
  s.want_user_stacks = !o.kernel_stacks_only;
  s.want_kernel_stacks = !o.user_stacks_only;
  s.min_block_ns = o.min_block_us * 1000;
  s.max_block_ns =
      o.max_block_us >= UINT64_MAX / 1000 ? UINT64_MAX : o.max_block_us * 1000;
  s.state_filter = o.state ? *o.state : -1;
  s.state_classes = o.state_classes;
  s.show_state = o.show_state;
  // The timeline's events take their wakers without putting them in keys.
  s.want_wakers = o.wakers || o.events;
  s.cut_irq_stacks = s.want_wakers;
  s.key_wakers = o.wakers;
  s.want_events = o.events;
  s.events_min_ns = o.events_min_us * 1000;
  s.follow_children = o.follow_children;
  set_target_name(s, o.name);
  s.filter_cgroup = !o.cgroup_ids.empty();
  s.key_cgroup = o.per_cgroup;
  s.split_runqueue = o.runqueue;
  s.runq_from_sched_info = o.runqueue && !wants_waking_hook(o, p);
  s.has_prev_state_arg = p.prev_state_arg;
  s.kstack_at_switch_in = p.kstack_at_switch_in;
  s.kwalk_orc = p.kstack_at_switch_in;
  s.ktext = p.kernel_text; // zero where unknown: no ORC walk, no irq test
  s.irqentry_start = p.kernel_text.irqentry_start;
  s.irqentry_end = p.kernel_text.irqentry_end;
  if (o.kernel_unwind_limit)
    s.kwalk_limit = o.kernel_unwind_limit;
  s.kwalk_verify = o.verify_kernel_unwind;
  s.reuse_verify = o.verify_stack_reuse;
  s.reuse_stacks = !o.no_stack_reuse;
  s.uw_time_walks = o.time_walks;
  s.use_task_storage = p.task_storage;
  // What threads hold is added at stop by the flush iterator.
  s.hold_waits = p.task_storage && p.flush_open_waits;
  s.user_fp_walk = p.user_fp_walk;
  s.use_bpf_loop = p.bpf_loop;
  s.announce_processes = p.announce_processes;
  s.stack_depth = o.max_stack_depth;
  s.window_stack_limit = o.stack_storage_size - o.stack_reserve;
  // The deep stacks' map keeps the same share for the edges.
  const uint32_t deep = deep_stack_storage(o.stack_storage_size);
  const uint64_t deep_reserve =
      o.stack_storage_size
          ? uint64_t{deep} * o.stack_reserve / o.stack_storage_size
          : 0;
  s.window_deep_stack_limit = deep - static_cast<uint32_t>(deep_reserve);
  s.window_counts_limit = o.max_entries - o.counts_reserve;
  s.uw_tables = p.user_unwind_tables;
  s.uw_find_vma = p.user_unwind_tables && p.find_vma;
  // Read only by the object with plain loads (the others ignore them).
  s.uw_direct_base = p.direct_loads ? p.direct_map_base : 0;
  s.uw_pt_levels = p.direct_loads ? p.page_table_levels : 0;
  // Stacks left for the switch-in need the page-table reads and the memos,
  // and pay only where -m/-M drop waits (their stacks are then never
  // taken). At the defaults nearly every wait is charged: its memo is
  // checked at switch-out, while the thread's stack is still in the cache,
  // not at a switch-in after other threads ran (1,000 threads sleeping 10
  // ms: 0.65x the BPF time per switch).
  s.edges_later = p.edges_after_attach;
  s.uw_defer = s.uw_direct_base && s.uw_tables && s.reuse_stacks &&
               (s.min_block_ns > 1000 || s.max_block_ns != UINT64_MAX);
  return s;
}

// Map sizes. The stack and count maps stay preallocated (a few ms at
// start): allocating on insert (6.1+) failed with ENOMEM in bursts of new
// stacks under perf bench sched pipe, and a stack was lost.
offcpu_map_sizes map_sizes(const OffcpuConfig &o, const OffcpuPlan &p) {
  offcpu_map_sizes s{};
  SharedMapNeeds need;
  need.pids = o.pids.size();
  // Children join the process filter as they are forked.
  need.follow_children = o.follow_children;
  need.tids = o.tids.size();
  need.cgroups = o.cgroup_ids.size();
  need.stack_storage = o.stack_storage_size;
  need.wakers = o.wakers || o.events;
  if (p.user_unwind_tables)
    need.unwind = o.unwind_sizes;
  set_shared_sizes(&s, shared_map_sizes(need));
  s.counts = o.max_entries;
  // One in-flight wait per blocked thread; sized for large hosts.
  s.starts_hash = p.task_storage ? 1u : 262144u;
  s.events = o.events ? timeline_ring_bytes(o.events_memory_mib) : 4096u;
  return s;
}

// The waits the aggregation map had no room for, summed per process and
// thread name in the overflow map: one key each, without stacks ([Missed
// ... Stack]), so their time stays in the profile under their names.
void add_overflow(int overflow_fd, RawProfile &out) {
  for (const auto &ok : map_keys<offcpu_overflow_key>(overflow_fd)) {
    offcpu_totals t{};
    if (bpf_map_lookup_elem(overflow_fd, &ok, &t) != 0 || !t.count)
      continue;
    // No histogram: the model shows these waits' totals only.
    offcpu_value val{};
    val.total_ns = t.total_ns;
    val.count = t.count;
    val.runq_ns = t.runq_ns;
    offcpu_key key{};
    key.tgid = ok.tgid;
    key.pid = ok.tgid; // the threads are not told apart
    key.user_stack = OFFCPU_STACK_MISSED;
    key.kernel_stack = OFFCPU_STACK_MISSED;
    std::memcpy(key.comm, ok.comm, sizeof(key.comm));
    out.counts.push_back({key, val});
  }
}

// The counts map's entries with waits, then the overflow map's. In chunks
// (see CountEntries): a vector grown by doubling held them up to three
// times at once, 54 MiB for 110,000 keys on a whole-system run, and one of
// their exact size still held them beside the samples (issue #27).
CountEntries read_counts(int counts_fd, int overflow_fd) {
  RawProfile out;
  for_each_entry<offcpu_key, offcpu_value>(
      counts_fd, [&out](const offcpu_key &key, const offcpu_value &val) {
        // Empty: entered for a wait a thread held, lost with it (counted).
        if (val.count)
          out.counts.push_back({key, val});
      });
  add_overflow(overflow_fd, out);
  return std::move(out.counts);
}

Bss *bss_of(const OffcpuSession::Handles &h) {
  return static_cast<Bss *>(h.bss);
}

// What the plan creates and loads of the maps and programs that not every
// plan uses (libbpf's skeleton; the light one loads all).
struct Wanted {
#define OFFCPU_WANT_FIELD(name) bool name = false;
  OFFCPU_OPTIONAL_MAPS(OFFCPU_WANT_FIELD)
  OFFCPU_PROGS(OFFCPU_WANT_FIELD)
  OFFCPU_RAW_PROGS(OFFCPU_WANT_FIELD)
#undef OFFCPU_WANT_FIELD
};

Wanted wanted(const OffcpuConfig &o, const OffcpuPlan &p) {
  Wanted w;
  w.new_processes = p.announce_processes;
  w.starts_task = p.task_storage;
  w.waker_memos = p.task_storage;
  w.offcpu_switch_btf = p.tp_btf;
  w.offcpu_switch_raw = !p.tp_btf;
  const bool waking = wants_waking_hook(o, p);
  w.offcpu_waking_btf = waking && p.tp_btf;
  w.offcpu_waking_raw = waking && !p.tp_btf;
  w.offcpu_fork_btf = o.follow_children && p.tp_btf;
  w.offcpu_fork_raw = o.follow_children && !p.tp_btf;
  w.offcpu_seed_open = p.seed_open_waits;
  w.offcpu_seed_stacks = p.seed_user_stacks;
  w.offcpu_flush = p.flush_open_waits;
  return w;
}

// --fail-load: a size the kernel refuses (E2BIG), so that the load named
// fails where a real one would, in the kernel, and its fallback runs.
void sizes_that_fail(offcpu_map_sizes *sizes) {
  sizes->counts = UINT32_MAX;
}

int try_load(offcpu_bpf *skel, const OffcpuConfig &o, const OffcpuPlan &p,
             bool fail) {
  write_settings(skel->rodata, settings_for(o, p));
  offcpu_map_sizes sizes = map_sizes(o, p);
  if (fail)
    sizes_that_fail(&sizes);
  const Wanted w = wanted(o, p);
#define OFFCPU_SET_SIZE(name)                                                  \
  bpf_map__set_max_entries(skel->maps.name, sizes.name);
#define OFFCPU_SET_CREATE(name)                                                \
  bpf_map__set_autocreate(skel->maps.name, w.name);
#define OFFCPU_SET_LOAD(name)                                                  \
  bpf_program__set_autoload(skel->progs.name, w.name);
  OFFCPU_SIZED_MAPS(OFFCPU_SET_SIZE)
  OFFCPU_OPTIONAL_MAPS(OFFCPU_SET_CREATE)
  OFFCPU_PROGS(OFFCPU_SET_LOAD)
  OFFCPU_RAW_PROGS(OFFCPU_SET_LOAD)
#undef OFFCPU_SET_SIZE
#undef OFFCPU_SET_CREATE
#undef OFFCPU_SET_LOAD
  return offcpu_bpf__load(skel);
}

// The light skeleton loads every program and map, so it only serves the
// plan that uses them all (a modern kernel's).
bool light_can_serve(const OffcpuPlan &p) {
  return p.tp_btf && p.task_storage && p.bpf_loop && p.announce_processes &&
         p.seed_open_waits && p.seed_user_stacks && p.flush_open_waits &&
         p.user_fp_walk;
}

// --fail-load generated: the split load's objects by libbpf, as where this
// libbpf's generated loader is not the shape expected.
ShareLoader share_loader(const OffcpuConfig &o) {
  return o.fails_load("generated") ? ShareLoader::Libbpf
                                   : ShareLoader::Generated;
}

const char *share_loader_name(ShareLoader l) {
  return l == ShareLoader::Generated ? "generated loader" : "libbpf";
}

// Whether the window edges' iterators may load after the attach
// (collect/edge_loader.h): in the split load, which loads objects of the
// same BPF object already, where a switch-in can take a seeded wait's user
// stack from its frozen stack (plain loads, the page-table reads). Not with
// the light object alone (--loader light): by libbpf there, a default
// run's peak RSS went from 21.6 to 29.7 MB (idle host) and its CPU up
// 20-40 ms, for 144 -> 112 ms of start-up. Not for a command or
// --children either: a process tree that starts under offcpu forks and
// execs in the window's first ms, when the rewalk passes (this iterator,
// with bpf_find_vma) finish the stacks walked before their tables; with
// them late, a command that execs itself 30 times had 0.96 of its time on
// whole stacks, not 0.998.
bool edges_can_wait(const OffcpuConfig &o, const OffcpuPlan &p) {
  return o.loader == Loader::Auto && !o.follow_children && light_can_serve(p) &&
         p.direct_loads && p.direct_map_base != 0 && p.user_unwind_tables;
}

// What -v says of the split load.
constexpr const char *kSplitLoaded =
    "in parallel (maps by the kernel's light skeleton, the programs in two "
    "threads)";

// The name --fail-load gives the light object `direct` says.
const char *light_name(bool direct) {
  return direct ? "light" : "light-probe-reads";
}

// maps_only: the split load's first object, which creates the maps only.
int try_load_light(offcpu_light *l, const OffcpuConfig &o, const OffcpuPlan &p,
                   std::string *log = nullptr, bool maps_only = false) {
  size_t size = 0;
  void *ro = offcpu_light_rodata(l, &size);
  if (!ro || size != sizeof(Rodata))
    return -EINVAL;
  offcpu_settings settings = settings_for(o, p);
  settings.maps_only = maps_only;
  write_settings(static_cast<Rodata *>(ro), settings);
  offcpu_map_sizes sizes = map_sizes(o, p);
  if (o.fails_load(light_name(p.direct_loads)))
    sizes_that_fail(&sizes);
    // The split load's big maps are created beside it (create_split_maps).
#define OFFCPU_ONE_ENTRY(name) sizes.name = 1;
  if (maps_only) {
    OFFCPU_SPLIT_BIG_MAPS(OFFCPU_ONE_ENTRY)
  }
#undef OFFCPU_ONE_ENTRY
  offcpu_light_set_sizes(l, &sizes);
  if (!log)
    return offcpu_light_load(l, nullptr, 0);
  std::string buf(size_t{1} << 20, '\0');
  int err = offcpu_light_load(l, buf.data(), buf.size());
  buf.resize(strnlen(buf.data(), buf.size()));
  *log = std::move(buf);
  return err;
}

// Why the kernel refused a light object, for -v: loads it again with the
// verifier's log and prints the log's last lines (the refused program's
// failing path ends there). A second load costs a verification; only -v
// pays it. `maps_only`: the split load's object that creates the maps.
void explain_light_failure(bool direct, const OffcpuConfig &o,
                           const OffcpuPlan &p, bool maps_only) {
  struct Destroy {
    void operator()(offcpu_light *l) const { offcpu_light_destroy(l); }
  };
  std::unique_ptr<offcpu_light, Destroy> again(
      maps_only ? offcpu_light_open_maps() : offcpu_light_open(direct));
  std::string log;
  if (!again || try_load_light(again.get(), o, p, &log, maps_only) == 0 ||
      log.empty())
    return;
  size_t from = log.size();
  for (int lines = 0; from > 0 && lines < 25; lines++)
    from = log.rfind('\n', from - 1 - (log[from - 1] == '\n'));
  from = from == std::string::npos ? 0 : from + 1;
  fprintf(stderr, "offcpu: the verifier's log, last lines:\n%s",
          log.c_str() + from);
}

// A light object that failed to load: noted for the warning with the
// next choice's cost (the objects with probe reads, the other light one
// and libbpf's, check stacks by helper calls; libbpf parses the kernel's
// BTF, ~11 MB: README "Start-up and memory"), and explained under -v.
void light_failed(LoadFallbacks &fallbacks, bool direct, int err,
                  const OffcpuConfig &o, const OffcpuPlan &p, bool verbose,
                  bool maps_only = false) {
  if (direct)
    fallbacks.failed("the light BPF object with plain loads", err,
                     "stacks checked by probe reads (more BPF time per "
                     "switch)");
  else
    fallbacks.failed("the light BPF object with probe reads", err,
                     "libbpf parses the kernel's BTF (about 11 MB more "
                     "memory, a slower start)");
  if (!verbose)
    return;
  explain_light_failure(direct, o, p, maps_only);
  fprintf(stderr, "offcpu: the in-kernel loader failed (%s)%s\n",
          errno_text(err).c_str(),
          direct ? "; trying the object with probe reads"
                 : "; loading with libbpf");
}

} // namespace

void OffcpuSession::SkelDeleter::operator()(offcpu_bpf *skel) const {
  offcpu_bpf__destroy(skel);
}

void OffcpuSession::LightDeleter::operator()(offcpu_light *l) const {
  offcpu_light_destroy(l);
}

OffcpuSession::OffcpuSession(OffcpuPlan plan, bool verbose)
    : plan_(plan), verbose_(verbose) {}

OffcpuSession::~OffcpuSession() {
  edges_.reset(); // its thread uses the maps and the members below
}

void OffcpuSession::take(std::unique_ptr<offcpu_bpf, SkelDeleter> skel) {
  skel_ = std::move(skel);
  // -1 for what was not created or loaded.
  auto map_fd = [](const bpf_map *m) { return std::max(bpf_map__fd(m), -1); };
  auto prog_fd = [](const bpf_program *p) {
    return bpf_program__autoload(p) ? bpf_program__fd(p) : -1;
  };
  offcpu_fds fds{};
#define OFFCPU_MAP_FD(name) fds.name = map_fd(skel_->maps.name);
#define OFFCPU_PROG_FD(name) fds.name = prog_fd(skel_->progs.name);
  OFFCPU_MAPS(OFFCPU_MAP_FD)
  OFFCPU_PROGS(OFFCPU_PROG_FD)
  OFFCPU_RAW_PROGS(OFFCPU_PROG_FD)
#undef OFFCPU_MAP_FD
#undef OFFCPU_PROG_FD
  set_handles(fds, skel_->bss);
}

bool OffcpuSession::take(std::unique_ptr<offcpu_light, LightDeleter> light,
                         std::unique_ptr<SplitPrograms> programs) {
  light_ = std::move(light);
  split_ = std::move(programs);
  offcpu_light *l = light_.get();
  size_t size = 0;
  void *bss = offcpu_light_bss(l, &size);
  if (!bss || size != sizeof(Bss))
    return false;
  offcpu_fds fds{};
  offcpu_light_get_fds(l, &fds);
  if (split_) {
#define OFFCPU_SPLIT_PROG(name) fds.name = split_->name.get();
#define OFFCPU_SPLIT_MAP(name) fds.name = split_->maps.name.get();
    OFFCPU_PROGS(OFFCPU_SPLIT_PROG)
    OFFCPU_SPLIT_BIG_MAPS(OFFCPU_SPLIT_MAP)
#undef OFFCPU_SPLIT_PROG
#undef OFFCPU_SPLIT_MAP
  }
  set_handles(fds, bss);
  return true;
}

void OffcpuSession::set_handles(const offcpu_fds &fds, void *bss) {
  h_.fd = fds;
  h_.bss = bss;
  // The plan's hooks: BTF-enabled tracepoints or raw ones.
  const bool btf = plan_.tp_btf;
  h_.switch_prog = btf ? fds.offcpu_switch_btf : fds.offcpu_switch_raw;
  h_.waking_prog = btf ? fds.offcpu_waking_btf : fds.offcpu_waking_raw;
  h_.fork_prog = btf ? fds.offcpu_fork_btf : fds.offcpu_fork_raw;
  h_.unwind = {fds.uw_procs,    fds.uw_files, fds.uw_pages,
               fds.uw_rows,     fds.uw_rules, &bss_of(h_)->uw_epoch,
               fds.uw_file_ids, fds.uw_asked};
}

void OffcpuSession::configure(const OffcpuConfig &opts) {
  waking_ = wants_waking_hook(opts, plan_);
  forks_ = opts.follow_children;
  if (plan_.edges_after_attach) {
    edge_settings_ = settings_for(opts, plan_);
    edges_fail_ = opts.fails_load("edges");
    edges_loader_ = share_loader(opts);
    edges_delay_ms_ = opts.edges_delay_ms;
  }
  if (opts.events)
    events_ = std::make_unique<EventReader>(
        h_.fd.events, uint64_t{opts.events_memory_mib} << 20);
  fill_id_set(h_.fd.filter_tgids, opts.pids);
  fill_cgroup_set(h_.fd.filter_cgroups, opts.cgroup_ids);
  fill_id_set(h_.fd.filter_tids, opts.tids);
}

std::unique_ptr<OffcpuSession>
OffcpuSession::load(const OffcpuConfig &opts,
                    const std::vector<OffcpuPlan> &plans, bool verbose) {
  if (plans.empty())
    throw runtime_error("no way to attach to sched_switch on this kernel "
                        "(needs BTF-enabled or raw tracepoints)");
  // Events travel through a BPF ring buffer (5.8+), as announcements do.
  if (opts.events && !plans[0].announce_processes)
    throw runtime_error("the timeline (.json, .perfetto-trace, --top-waits) "
                        "needs BPF ring buffers: Linux 5.8 or later");
  // Loads tried that failed: said in one warning once one succeeds.
  LoadFallbacks fallbacks;
  auto loaded = [&](std::unique_ptr<OffcpuSession> s, const char *loader,
                    const std::string &what) {
    s->configure(opts);
    if (verbose)
      fprintf(stderr, "offcpu: attach plan: %s; loaded %s\n",
              s->plan_.describe().c_str(), loader);
    if (fallbacks.any())
      warn(fallbacks.warning(what));
    take_libbpf_messages();
    return s;
  };
  bool direct_failed = false; // in the split load: not tried again alone
  if (auto s = load_split(opts, plans[0], verbose, fallbacks, direct_failed))
    return loaded(std::move(s), kSplitLoaded, "the split load");
  if (opts.loader != Loader::Libbpf && light_can_serve(plans[0])) {
    // The object with plain loads where the kernel has them, else (or if
    // it fails) the one with probe reads.
    int err = -ENOENT;
    for (bool direct : {true, false}) {
      if (direct && (!plans[0].direct_loads || direct_failed ||
                     opts.loader == Loader::LightProbeReads))
        continue;
      std::unique_ptr<offcpu_light, LightDeleter> light(
          offcpu_light_open(direct));
      // The object with probe reads must not be told to read through the
      // page tables (its rodata says how stacks are read).
      OffcpuPlan plan = plans[0];
      plan.direct_loads = direct;
      err = light ? try_load_light(light.get(), opts, plan) : -ENOMEM;
      if (err == 0) {
        std::unique_ptr<OffcpuSession> s(new OffcpuSession(plan, verbose));
        if (s->take(std::move(light)))
          return loaded(std::move(s),
                        "by the kernel (light skeleton: no BTF parsed here)",
                        direct ? "the light object with plain loads"
                               : "the light object with probe reads");
        err = -EINVAL; // a .bss that is not the object's: never seen
      }
      light_failed(fallbacks, direct, err, opts, plan, verbose);
    }
  }
  if (opts.loader == Loader::Light || opts.loader == Loader::LightProbeReads)
    throw runtime_error("--loader light is not possible on this kernel");
  int last_err = 0;
  for (const OffcpuPlan &plan : plans) {
    std::unique_ptr<offcpu_bpf, SkelDeleter> skel(offcpu_bpf__open());
    if (!skel)
      throw runtime_error("cannot open the BPF object: " + errno_text(errno));
    OffcpuPlan loaded_plan = plan;
    loaded_plan.direct_loads = false; // the regular object has probe reads
    int err = try_load(skel.get(), opts, loaded_plan,
                       opts.fails_load("tp_btf") && plan.tp_btf);
    const std::string name = std::string("libbpf's ") +
                             (plan.tp_btf ? "tp_btf" : "raw_tp") + " plan";
    if (err == 0) {
      std::unique_ptr<OffcpuSession> s(new OffcpuSession(loaded_plan, verbose));
      s->take(std::move(skel));
      return loaded(std::move(s), "by libbpf", name);
    }
    last_err = err;
    // The raw_tp plan (the last) walks kernel stacks at every switch-out
    // and keeps start times in a hash map: several times the cost.
    fallbacks.failed(name, err,
                     "kernel stacks walked at every switch-out, start times "
                     "in a hash map (several times the BPF time per switch)");
    if (verbose)
      fprintf(stderr, "offcpu: plan failed to load (%s): %s\n",
              errno_text(err).c_str(), plan.describe().c_str());
  }
  std::string log = take_libbpf_messages();
  if (verbose && !log.empty())
    fprintf(stderr, "%s", log.c_str());
  throw runtime_error(load_failure(last_err));
}

std::unique_ptr<OffcpuSession>
OffcpuSession::load_split(const OffcpuConfig &opts, const OffcpuPlan &chosen,
                          bool verbose, LoadFallbacks &fallbacks,
                          bool &direct_failed) {
  OffcpuPlan plan = chosen;
  plan.edges_after_attach = edges_can_wait(opts, plan);
  // With the waking hook or without: through generated loaders the switch
  // hook alone (~60 ms) is well under the light object's whole load
  // (startup.py, exec to attached: default 130 -> 95 ms, --wakers 129 ->
  // 99). By libbpf it was not (default 198 vs 190 ms): each object parsed
  // the kernel's BTF first.
  if (opts.loader != Loader::Auto || !light_can_serve(plan) ||
      !plan.direct_loads)
    return nullptr;
  const uint64_t t0 = monotonic_ns();
  auto programs = std::make_unique<SplitPrograms>();
  int big_err = 0;
  auto create_big = [&] {
    big_err = create_split_maps(map_sizes(opts, plan), programs.get());
  };
  std::thread big;
  try {
    big = std::thread(create_big);
  } catch (const std::system_error &) {
    create_big(); // no thread to be had: before the others
  }
  std::unique_ptr<offcpu_light, LightDeleter> light(offcpu_light_open_maps());
  int err =
      light ? try_load_light(light.get(), opts, plan, nullptr, true) : -ENOMEM;
  if (big.joinable())
    big.join();
  if (err == 0 && big_err != 0) {
    fallbacks.failed("the split load's maps", big_err,
                     "the programs verified one after the other (a "
                     "slower start)");
    return nullptr;
  }
  if (err != 0) {
    // The maps of the light object alone would fail the same way.
    direct_failed = true;
    light_failed(fallbacks, true, err, opts, plan, verbose, true);
    return nullptr;
  }
  const uint64_t maps_ns = monotonic_ns() - t0;
  SplitWant want;
  want.waking = wants_waking_hook(opts, plan);
  want.fork = opts.follow_children;
  want.fail = opts.fails_load("split");
  want.loader = share_loader(opts);
  want.edges = !plan.edges_after_attach;
  SplitTimes times;
  err = load_split_programs(light.get(), settings_for(opts, plan), want,
                            programs.get(), &times);
  if (verbose)
    fprintf(stderr,
            "offcpu: split load: maps %llu ms, then the programs in %llu and "
            "%llu ms at once (%s, %s)\n",
            static_cast<unsigned long long>(maps_ns / 1000000),
            static_cast<unsigned long long>(times.first_ns / 1000000),
            static_cast<unsigned long long>(times.second_ns / 1000000),
            share_loader_name(times.first), share_loader_name(times.second));
  if (err == 0) {
    std::unique_ptr<OffcpuSession> s(new OffcpuSession(plan, verbose));
    if (s->take(std::move(light), std::move(programs)))
      return s;
    err = -EINVAL; // a .bss that is not the object's: never seen
  }
  fallbacks.failed("the split load (the light object's maps, the programs "
                   "in two threads)",
                   err,
                   "the programs verified one after the other (a "
                   "slower start)");
  if (verbose) {
    std::string log = take_libbpf_messages();
    if (log.size() > 4000)
      log.erase(0, log.size() - 4000);
    fprintf(stderr,
            "%soffcpu: the split load failed (%s); loading the light "
            "object alone\n",
            log.c_str(), errno_text(err).c_str());
  }
  return nullptr;
}

void OffcpuSession::attach(double duration_s) {
  // Forks first: a process forked while the rest attaches is not missed.
  if (forks_) {
    fork_link_.reset(bpf_raw_tracepoint_open(
        plan_.tp_btf ? nullptr : "sched_process_fork", h_.fork_prog));
    if (!fork_link_)
      throw runtime_error("cannot attach to sched_process_fork: " +
                          errno_text(errno));
  }
  // Wakeups next: every wait the switch hook opens can then be woken.
  if (waking_) {
    waking_link_.reset(bpf_raw_tracepoint_open(
        plan_.tp_btf ? nullptr : "sched_waking", h_.waking_prog));
    if (!waking_link_)
      throw runtime_error("cannot attach to sched_waking: " +
                          errno_text(errno));
  }
  switch_link_.reset(bpf_raw_tracepoint_open(
      plan_.tp_btf ? nullptr : "sched_switch", h_.switch_prog));
  if (!switch_link_)
    throw runtime_error("cannot attach to sched_switch: " + errno_text(errno));
  start_ns_ = monotonic_ns();
  bss_of(h_)->window_start_ns = start_ns_;
  if (duration_s > 0) {
    planned_stop_ns_ = start_ns_ + static_cast<uint64_t>(duration_s * 1e9);
    bss_of(h_)->stop_ns = planned_stop_ns_;
  }
}

void OffcpuSession::seed_open_waits() {
  // Waits in progress: opened at once, user stacks filled in after, with
  // the map room kept for the window's edges (see window_stack_limit).
  if (plan_.seed_open_waits) {
    bss_of(h_)->reserve_open = OFFCPU_RESERVE_ITER;
    int err = run_iterator(h_.fd.offcpu_seed_open);
    if (!err && plan_.seed_user_stacks && !plan_.edges_after_attach)
      err = run_iterator(h_.fd.offcpu_seed_stacks);
    bss_of(h_)->reserve_open = 0;
    if (err)
      fprintf(stderr,
              "offcpu: warning: waits in progress at start not all seen: %s\n",
              errno_text(err).c_str());
  }
}

void OffcpuSession::start_edges() {
  if (plan_.edges_after_attach && !edges_)
    load_edges();
}

void OffcpuSession::load_edges() {
  // Only the split load defers them (edges_can_wait): its light object
  // holds the maps, its programs the big ones.
  offcpu_light *light = light_.get();
  const SplitPrograms *big = split_.get();
  const uint64_t attached = start_ns_;
  auto load = [this, light, big](SplitPrograms *out) {
    if (!light || !big)
      return -EINVAL; // never: edges_after_attach is the split load's
    if (edges_delay_ms_)
      std::this_thread::sleep_for(std::chrono::milliseconds(edges_delay_ms_));
    return load_edge_programs(light, *big, edge_settings_, edges_fail_,
                              &edges_loader_, out);
  };
  // Then the seeding's second pass: the user stacks of the waits open at
  // start whose tasks still block (the others were taken at switch-in).
  auto then = [this, attached](const SplitPrograms &p) {
    // With the map room kept for the window's edges, as the first pass had.
    uint32_t *reserve = &bss_of(h_)->reserve_open;
    __atomic_fetch_or(reserve, OFFCPU_RESERVE_ITER, __ATOMIC_RELAXED);
    int err = run_iterator(p.offcpu_seed_stacks.get());
    __atomic_fetch_and(reserve, ~uint32_t{OFFCPU_RESERVE_ITER},
                       __ATOMIC_RELAXED);
    if (err)
      fprintf(stderr,
              "offcpu: warning: user stacks of the waits in progress at start "
              "not all taken: %s\n",
              errno_text(err).c_str());
    if (verbose_)
      fprintf(stderr,
              "offcpu: the window edges' iterators loaded (%s) and the "
              "waits open at start walked %llu ms after the attach\n",
              share_loader_name(edges_loader_),
              static_cast<unsigned long long>((monotonic_ns() - attached) /
                                              1000000));
  };
  edges_ = std::make_unique<EdgeLoader>(load, then);
}

uint64_t OffcpuSession::edges_ready_ns() const {
  return edges_ ? edges_->done_ns() : 0;
}

int OffcpuSession::edge_program(bool flush) {
  if (plan_.edges_after_attach && !edges_)
    return -1; // never started: start_edges() was not called
  if (!edges_)
    return flush ? h_.fd.offcpu_flush : h_.fd.offcpu_seed_stacks;
  const SplitPrograms *p = edges_->wait();
  if (!p)
    return -1;
  return flush ? p->offcpu_flush.get() : p->offcpu_seed_stacks.get();
}

bool OffcpuSession::rewalk_user_stacks() {
  if (!plan_.seed_user_stacks)
    return false;
  // Still loading: asked again after the install gap, the requests read
  // meanwhile (the rewalker's thread does both).
  if (edges_ && !edges_->done())
    return true;
  const int prog = edge_program(false);
  if (prog < 0 || run_iterator(prog) != 0)
    return false;
  return __atomic_exchange_n(&bss_of(h_)->rewalks_deferred, 0,
                             __ATOMIC_RELAXED) != 0;
}

std::array<uint64_t, UW_STAT_NR> OffcpuSession::unwind_counters() const {
  std::array<uint64_t, UW_STAT_NR> sum{};
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0 || h_.fd.uw_stat_map < 0)
    return sum;
  std::vector<uw_stats> per_cpu(static_cast<size_t>(ncpus));
  for (uint32_t slot = 0; slot < 2; slot++)
    if (bpf_map_lookup_elem(h_.fd.uw_stat_map, &slot, per_cpu.data()) == 0)
      for (const uw_stats &s : per_cpu)
        for (size_t i = 0; i < UW_STAT_NR; i++)
          sum[i] += s.v[i];
  return sum;
}

void OffcpuSession::set_python(uint32_t tgid, const offcpu_py_proc &p) {
  if (h_.fd.py_procs < 0 ||
      bpf_map_update_elem(h_.fd.py_procs, &tgid, &p, BPF_ANY) != 0)
    return;
  // The process's stack memos were made without its Python chain: drop
  // them (every memo keys on the epoch), so that its threads are walked
  // with it from now on (bpf/user_unwind.bpf.h). Once per Python process.
  if (p.runtime && h_.unwind.epoch)
    __atomic_fetch_add(h_.unwind.epoch, 1, __ATOMIC_SEQ_CST);
}

std::array<uint64_t, OFFCPU_PY_STAT_NR> OffcpuSession::python_counters() const {
  std::array<uint64_t, OFFCPU_PY_STAT_NR> sum{};
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0 || h_.fd.py_stat_map < 0)
    return sum;
  std::vector<std::array<uint64_t, OFFCPU_PY_STAT_NR>> per_cpu(
      static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(h_.fd.py_stat_map, &zero, per_cpu.data()) == 0)
    for (const auto &c : per_cpu)
      for (size_t i = 0; i < OFFCPU_PY_STAT_NR; i++)
        sum[i] += c[i];
  return sum;
}

std::vector<uint64_t> OffcpuSession::read_stack(uint64_t id) const {
  // Not kept: a copy of every stack announced would be held beside the
  // DWARF the loader holds while the window is open (2 MiB more at the
  // peak of 8 s of pgbench), for a system call saved per stack that more
  // than one process announces.
  return offcpu::read_stack(stack_maps(), id);
}

bool OffcpuSession::wait(uint64_t deadline, const NewStack &new_stack,
                         const IdleWork &idle, const Finished &finished) {
  if (!announcements_) {
    announcements_ = std::make_unique<Announcements>(
        plan_.announce_processes ? h_.fd.new_processes : -1);
    if (plan_.user_unwind_tables && unwind_request_)
      announcements_->add_requests(h_.fd.uw_requests, unwind_request_);
    announcements_->wake_on(wake_fd_);
  }
  if (!events_)
    return announcements_->wait(deadline, new_stack, idle, finished);
  // The events ring is read after every poll (it wakes no one).
  IdleWork read_events = [this, &idle](uint64_t until) {
    events_->consume();
    return idle ? idle(until) : true;
  };
  return announcements_->wait(deadline, new_stack, read_events, finished);
}

void OffcpuSession::read_announced(const NewStack &new_stack) {
  if (announcements_)
    announcements_->read_backlog(new_stack);
}

void OffcpuSession::stop() {
  if (stop_ns_)
    return;
  stop_ns_ = monotonic_ns();
  if (planned_stop_ns_ && planned_stop_ns_ < stop_ns_)
    stop_ns_ = planned_stop_ns_; // the kernel closed the window on time
  // Ctrl-C or SIGTERM: the window ended at the signal (its handler closed
  // it in the kernel, see WindowEndOnSignal), not when the work in
  // progress then was done.
  if (uint64_t at = stop_signal_ns(); at && at < stop_ns_)
    stop_ns_ = std::max(at, start_ns_);
  // From here on switch-ins end their waits at stop_ns and no wait opens;
  // they and the flush may use the map room kept for the stop pass.
  bss_of(h_)->reserve_open = OFFCPU_RESERVE_ITER | OFFCPU_RESERVE_HOOK;
  bss_of(h_)->stop_ns = stop_ns_;
  // The edges' iterators, if they load after the attach, are needed now: a
  // window shorter than their load waits for it. Without them, what threads
  // hold is added after the detach, and what is still open counted.
  if (plan_.edges_after_attach) {
    if (!edges_ || !edges_->wait()) {
      detach();
      return release_without_flush();
    }
    // The late pass gives its own room back when it is done.
    __atomic_fetch_or(&bss_of(h_)->reserve_open,
                      OFFCPU_RESERVE_ITER | OFFCPU_RESERVE_HOOK,
                      __ATOMIC_RELAXED);
  }
  auto flush = [&] {
    const int prog = edge_program(true);
    if (!plan_.flush_open_waits || prog < 0)
      return;
    int err = run_iterator(prog);
    if (err)
      fprintf(stderr, "offcpu: waits still open at stop were not charged: %s\n",
              errno_text(err).c_str());
  };
  if (plan_.kstack_at_switch_in) {
    // Stacks are walked when a wait ends: flush while switch-ins still close
    // their own waits (a record is charged by whichever claims it first), so
    // that no task runs again with its stack unwalked. First let every hook
    // that began before the window's end return (it may have opened a wait,
    // ended one without claiming it, or held one in the task's storage):
    // MEMBARRIER_CMD_GLOBAL is synchronize_rcu(), and the hook runs under
    // RCU. Kernels without it (before 4.3) get a pause instead.
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
      usleep(20000);
    take_deferred_stacks();
    flush();
    detach();
  } else {
    // Detaching waits for programs in flight, so the flush cannot race with
    // a switch-in charging the same wait.
    detach();
    take_deferred_stacks();
    flush();
  }
}

void OffcpuSession::detach() {
  switch_link_.reset();
  waking_link_.reset();
  fork_link_.reset();
}

void OffcpuSession::release_without_flush() {
  // The seeding iterator, run at stop, adds what threads hold (see
  // bpf/window_edges.bpf.h) and counts the waits still open.
  bss_of(h_)->release_pass = 1;
  int err = run_iterator(h_.fd.offcpu_seed_open);
  const unsigned long long open = bss_of(h_)->edges_open_lost;
  if (verbose_) {
    std::string log = take_libbpf_messages();
    if (log.size() > 4000)
      log.erase(0, log.size() - 4000);
    fprintf(stderr, "%s", log.c_str());
  }
  fprintf(stderr,
          "offcpu: warning: the programs of the window's edges failed to load "
          "(%s): the waits still open at stop are not charged (%llu "
          "waits%s)\n",
          errno_text(edges_ ? edges_->error() : -ENOENT).c_str(), open,
          err ? ", or more: the pass that counts them failed" : "");
}

void OffcpuSession::take_deferred_stacks() {
  // User stacks left for switch-ins that will not come in the window are
  // walked while their tasks still block (the flush cannot read them).
  const int prog = edge_program(false);
  if (plan_.direct_loads && plan_.seed_user_stacks && prog >= 0) {
    int err = run_iterator(prog);
    if (err)
      fprintf(stderr,
              "offcpu: user stacks of the waits still open at stop were not "
              "taken: %s\n",
              errno_text(err).c_str());
  }
}

// The per-CPU counters of charged waits, summed.
offcpu_charged OffcpuSession::charged() const {
  offcpu_charged sum{};
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0)
    return sum;
  std::vector<offcpu_charged> per_cpu(static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(h_.fd.waits_charged, &zero, per_cpu.data()) != 0)
    return sum;
  for (const offcpu_charged &c : per_cpu) {
    sum.waits += c.waits;
    for (int i = 0; i < OFFCPU_STATE_NR; i++)
      sum.state_ns[i] += c.state_ns[i];
    sum.held_waits += c.held_waits; // wraps back: one CPU's may be below 0
    sum.held_ns += c.held_ns;
  }
  return sum;
}

volatile uint64_t *OffcpuSession::window_end_word() {
  auto *word = &bss_of(h_)->stop_ns; // __u64: the same 8 bytes
  static_assert(sizeof(*word) == sizeof(uint64_t));
  return reinterpret_cast<volatile uint64_t *>(word);
}

OffcpuSession::Progress OffcpuSession::progress() const {
  Progress p;
  p.waits = charged().waits;
  p.keys = map_keys<offcpu_key>(h_.fd.counts).size();
  return p;
}

RawProfile OffcpuSession::drain() const {
  RawProfile out;
  out.window_ns = stop_ns_ > start_ns_ ? stop_ns_ - start_ns_ : 0;
  for (int i = 0; i < OFFCPU_LOST_NR; i++) {
    out.lost[i] = bss_of(h_)->lost[i];
    out.lost_ns[i] = bss_of(h_)->lost_ns[i];
  }
  for (int i = 0; i < OFFCPU_KUNWIND_NR; i++)
    out.kunwind[i] = bss_of(h_)->kunwind_stats[i];
  out.unseen_switch_ins = bss_of(h_)->switch_events[OFFCPU_EV_UNSEEN_SWITCH_IN];
  out.starts_spilled = bss_of(h_)->starts_spilled;
  bpf_prog_info info{};
  __u32 len = sizeof(info);
  if (bpf_obj_get_info_by_fd(h_.switch_prog, &info, &len) == 0)
    out.missed_switches = info.recursion_misses;

  out.counts = read_counts(h_.fd.counts, h_.fd.counts_overflow);
  // Waits whose stack found the storage full: their time, as a loss.
  for (const auto &[key, val] : out.counts)
    if (key.user_stack == OFFCPU_STACK_FULL ||
        key.kernel_stack == OFFCPU_STACK_FULL)
      out.lost_ns[OFFCPU_LOST_STACK_MAP_FULL] += val.total_ns;

  offcpu_charged sums = charged();
  std::copy(std::begin(sums.state_ns), std::end(sums.state_ns),
            out.state_ns.begin());
  // After stop every live thread's held waits are in `counts`: what is
  // still held belonged to threads gone without a last switch-out seen.
  out.lost[OFFCPU_LOST_HELD] = sums.held_waits;
  out.lost_ns[OFFCPU_LOST_HELD] = sums.held_ns;

  std::vector<uint64_t> ids, waker_ids;
  ids.reserve(2 * out.counts.size());
  waker_ids.reserve(out.counts.size());
  for (const auto &kv : out.counts) {
    ids.push_back(kv.first.user_stack);
    ids.push_back(kv.first.kernel_stack);
    waker_ids.push_back(kv.first.waker);
  }
  read_wakers(h_.fd.wakers, waker_ids, out.wakers, ids);
  read_stacks(stack_maps(), ids, out.stacks);
  return out;
}

RawTimeline OffcpuSession::take_events(RawProfile &raw) {
  if (!events_)
    return {};
  events_->consume(); // what the stop pass sent
  RawTimeline t = events_->take();
  std::vector<uint64_t> ids, waker_ids;
  for (const offcpu_event &e : t.events) {
    for (uint64_t id :
         {e.user_stack, e.kernel_stack, e.hop.user_stack, e.hop.kernel_stack})
      if (!raw.stacks.count(id))
        ids.push_back(id);
    for (uint64_t w : {e.waker, e.hop.waker})
      if (!raw.wakers.count(w))
        waker_ids.push_back(w);
  }
  read_wakers(h_.fd.wakers, waker_ids, raw.wakers, ids);
  read_stacks(stack_maps(), ids, raw.stacks);
  return t;
}

} // namespace offcpu
