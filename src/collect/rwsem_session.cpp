#include "collect/rwsem_session.h"

#include <bpf/bpf.h>
#include <linux/membarrier.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <unistd.h>

#include "collect/bpf_setup.h"
#include "collect/load_fallback.h"
#include "collect/offcpu_objects.h"
#include "rwsem.direct.skel.h"
#include "rwsem.skel.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/messages.h"
#include "util/signals.h"

namespace offcpu {
namespace {

uint32_t lock_kinds(const RwsemConfig &o) {
  if (o.lock_kinds)
    return o.lock_kinds;
  return (1u << OFFCPU_LOCK_RWSEM_WRITE) |
         (o.include_read ? 1u << OFFCPU_LOCK_RWSEM_READ : 0u);
}

// offcpu lock --futex (or -Y futex): the futex programs too.
bool futex(const RwsemConfig &o) {
  return (lock_kinds(o) & OFFCPU_LOCK_FUTEXES) != 0;
}

// The object with plain loads has the same maps, programs and globals as
// the one with probe reads (one source, one define): it is opened through
// the same skeleton, with its own bytes.
static_assert(sizeof(*rwsem_bpf().rodata) ==
                  sizeof(*rwsem_direct_bpf().rodata) &&
              sizeof(*rwsem_bpf().bss) == sizeof(*rwsem_direct_bpf().bss) &&
              sizeof(rwsem_bpf().maps) == sizeof(rwsem_direct_bpf().maps) &&
              sizeof(rwsem_bpf().progs) == sizeof(rwsem_direct_bpf().progs));

rwsem_bpf *open_rwsem(bool direct) {
  if (!direct)
    return rwsem_bpf__open();
  auto *obj = static_cast<rwsem_bpf *>(calloc(1, sizeof(rwsem_bpf)));
  if (!obj)
    return nullptr;
  int err = rwsem_bpf__create_skeleton(obj);
  if (!err) {
    obj->skeleton->data = rwsem_direct_bpf__elf_bytes(&obj->skeleton->data_sz);
    err = bpf_object__open_skeleton(obj->skeleton, nullptr);
  }
  if (err) {
    rwsem_bpf__destroy(obj);
    errno = -err;
    return nullptr;
  }
  return obj;
}

bool unwind_tables(const RwsemConfig &o, const RwsemPlan &p) {
  return o.user_unwind_tables && p.user_fp_walk && p.bpf_loop;
}

// Whether membarrier can wait out every BPF program run in flight (an RCU
// grace period; not with nohz_full CPUs).
bool can_wait_out_programs() {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL);
}

// The futex programs and their totals' map, where asked for. Where the
// drain cannot wait out the switch-ins in flight, they always take the
// thread's lock (futex.bpf.h).
void set_futex(rwsem_bpf *skel, const RwsemConfig &o) {
  bpf_map__set_max_entries(skel->maps.futex_waits,
                           futex(o) ? o.max_entries : 1);
  skel->bss->futex_draining = !can_wait_out_programs();
#define OFFCPU_FUTEX_AUTOLOAD(name)                                            \
  bpf_program__set_autoload(skel->progs.name, futex(o));
  OFFCPU_FUTEX_PROGS(OFFCPU_FUTEX_AUTOLOAD)
#undef OFFCPU_FUTEX_AUTOLOAD
}

// offcpu's own process as BPF sees it (the kernel's global ids): getpid()
// where offcpu runs in the initial pid namespace (/proc/self/ns/pid's
// inode is PROC_PID_INIT_INO there); 0, none excluded, in another, where
// getpid() is another process's tgid globally.
__u32 global_self_tgid() {
  constexpr ino_t kInitPidNamespace = 0xEFFFFFFCU;
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0 || st.st_ino != kInitPidNamespace)
    return 0;
  return static_cast<__u32>(getpid());
}

int try_load(rwsem_bpf *skel, const RwsemConfig &o, const RwsemPlan &p,
             uint64_t min_wait_ns) {
  offcpu_settings s = default_settings();
  set_target_name(s, o.name);
  s.match_thread_name = o.match_thread_name;
  // With children followed, processes join the filter while tracing.
  s.filter_tgid = !o.pids.empty() || o.follow_children;
  s.follow_children = o.follow_children;
  if (o.pids.size() == 1 && !o.follow_children)
    s.only_tgid = o.pids[0];
  s.filter_tid = !o.tids.empty();
  s.filter_cgroup = !o.cgroup_ids.empty();
  s.user_threads_only = o.user_threads_only;
  s.kernel_threads_only = o.kernel_threads_only;
  s.lock_kinds = lock_kinds(o);
  s.max_block_ns = o.max_wait_us * 1000;
  s.user_fp_walk = p.user_fp_walk;
  s.use_bpf_loop = p.bpf_loop;
  s.min_wait_ns = min_wait_ns;
  s.stack_depth = o.max_stack_depth;
  s.want_wakers = o.wakers;
  s.self_tgid = global_self_tgid();
  s.cut_irq_stacks = o.wakers;
  s.lock_slab_caches = o.slab_caches && p.mechanism != RwsemAttach::Kprobe;
  s.key_cgroup = o.key_cgroup;
  s.use_task_storage = p.task_storage;
  s.uw_direct_base = p.direct_loads ? p.direct_map_base : 0;
  s.uw_pt_levels = p.direct_loads ? p.page_table_levels : 0;
  // Tables need the walk from the task's registers and bpf_loop (5.17+).
  const bool tables = unwind_tables(o, p);
  s.uw_tables = tables;
  write_settings(skel->rodata, s);
  SharedMapNeeds need;
  need.pids = o.pids.size();
  need.tids = o.tids.size();
  need.cgroups = o.cgroup_ids.size();
  need.stack_storage = o.stack_storage_size;
  // Futex waits name their holder always: its stacks only with --wakers.
  need.wakers = o.wakers || futex(o);
  need.follow_children = o.follow_children;
  if (tables)
    need.unwind = o.unwind_sizes;
  size_shared_maps(skel, shared_map_sizes(need));
  bpf_map__set_max_entries(skel->maps.waits, o.max_entries);
  set_futex(skel, o);
  bpf_program__set_autoload(skel->progs.rwsem_waking, o.wakers);
  bpf_program__set_autoload(skel->progs.slab_names, s.lock_slab_caches);
  bpf_map__set_autocreate(skel->maps.lock_starts_task, p.task_storage);
  bpf_map__set_autocreate(skel->maps.lock_memos, p.task_storage);
  bpf_program__set_autoload(skel->progs.lock_open_waits, p.task_storage);
  bpf_program__set_autoload(skel->progs.lock_fork, o.follow_children);
  bpf_program__set_autoload(skel->progs.lock_exit, o.follow_children);

  auto &pr = skel->progs;
  bool fentry = p.mechanism == RwsemAttach::Fentry;
  bool kprobe = p.mechanism == RwsemAttach::Kprobe;
  bool tp = p.mechanism == RwsemAttach::Tracepoint;
  bool read = (lock_kinds(o) & (1u << OFFCPU_LOCK_RWSEM_READ)) &&
              !p.read_target.empty();
  // -Y futex alone: no kernel lock's contention to see.
  bool kernel_kinds = (lock_kinds(o) & ~OFFCPU_LOCK_FUTEXES) != 0;
  bpf_program__set_autoload(pr.rwsem_contention_begin, tp && kernel_kinds);
  bpf_program__set_autoload(pr.rwsem_contention_end, tp && kernel_kinds);
  bpf_program__set_autoload(pr.rwsem_fentry_write, fentry);
  bpf_program__set_autoload(pr.rwsem_fexit_write, fentry);
  bpf_program__set_autoload(pr.rwsem_fentry_read, fentry && read);
  bpf_program__set_autoload(pr.rwsem_fexit_read, fentry && read);
  bpf_program__set_autoload(pr.rwsem_kprobe_write, kprobe);
  bpf_program__set_autoload(pr.rwsem_kprobe_read, kprobe && read);
  bpf_program__set_autoload(pr.rwsem_kretprobe, kprobe);
  bool mutex =
      (lock_kinds(o) & (1u << OFFCPU_LOCK_MUTEX)) && !p.mutex_target.empty();
  bpf_program__set_autoload(pr.mutex_fentry, fentry && mutex);
  bpf_program__set_autoload(pr.mutex_fexit, fentry && mutex);
  bpf_program__set_autoload(pr.mutex_kprobe, kprobe && mutex);
  if (fentry) {
    bpf_program__set_attach_target(pr.rwsem_fentry_write, 0,
                                   p.write_target.c_str());
    bpf_program__set_attach_target(pr.rwsem_fexit_write, 0,
                                   p.write_target.c_str());
    if (read) {
      bpf_program__set_attach_target(pr.rwsem_fentry_read, 0,
                                     p.read_target.c_str());
      bpf_program__set_attach_target(pr.rwsem_fexit_read, 0,
                                     p.read_target.c_str());
    }
  }
  return rwsem_bpf__load(skel);
}

// A mechanism the kernel does not offer (fentry refused with EPERM where
// trampolines are off, no kprobes: ENOENT, EOPNOTSUPP) is a fallback the
// probes cannot foresee and costs nothing to say; any other failure of a
// plan they chose (the verifier's refusal) is a warning once one loads.
void note_failure(LoadFallbacks &fallbacks, const RwsemPlan &plan, int err) {
  const int e = err < 0 ? -err : err;
  if (e == EPERM || e == ENOENT || e == EOPNOTSUPP || e == 524 /*ENOTSUPP*/)
    return;
  fallbacks.failed(plan.describe(), e,
                   plan.mechanism == RwsemAttach::Fentry
                       ? "kprobes and the lock tracepoints cost more per wait"
                   : plan.mechanism == RwsemAttach::Kprobe
                       ? "the lock tracepoints run for every contended lock"
                       : "the slow-path probes see rwsems and mutexes only");
}

} // namespace

void RwsemSession::SkelDeleter::operator()(rwsem_bpf *skel) const {
  rwsem_bpf__destroy(skel);
}

RwsemSession::RwsemSession(std::unique_ptr<rwsem_bpf, SkelDeleter> skel,
                           RwsemPlan plan, uint64_t min_wait_ns)
    : skel_(std::move(skel)), plan_(std::move(plan)),
      min_wait_ns_(min_wait_ns) {}

RwsemSession::~RwsemSession() = default;

std::unique_ptr<RwsemSession>
RwsemSession::load(const RwsemConfig &opts, const std::vector<RwsemPlan> &plans,
                   bool verbose) {
  if (plans.empty()) {
    switch (opts.attach) {
    case RwsemAttach::Fentry:
      throw runtime_error("fentry is not available: the kernel has no BTF for "
                          "the rwsem slow path (try --attach tracepoint)");
    case RwsemAttach::Kprobe:
      throw runtime_error("kprobes are not available: the kernel was built "
                          "without CONFIG_KPROBES (try --attach tracepoint)");
    case RwsemAttach::Tracepoint:
      throw runtime_error("the lock:contention_begin/end tracepoints are not "
                          "available (they need Linux 5.19+)");
    default:
      throw runtime_error("no way to trace rwsem waits on this kernel: it has "
                          "neither fentry, kprobes nor the lock:contention "
                          "tracepoints (5.19+)");
    }
  }
  uint64_t min_wait_ns = opts.min_wait_us * 1000;
  int last_err = 0;
  std::string failures;
  LoadFallbacks fallbacks;
  for (const RwsemPlan &plan : plans) {
    std::unique_ptr<rwsem_bpf, SkelDeleter> skel(open_rwsem(plan.direct_loads));
    if (!skel)
      throw runtime_error("cannot open the BPF object: " + errno_text(errno));
    uint64_t floor = plan.entry_point_only
                         ? std::max<uint64_t>(min_wait_ns, 1000)
                         : min_wait_ns;
    int err = try_load(skel.get(), opts, plan, floor);
    if (err == 0) {
      fill_id_set(skel->maps.filter_tgids, opts.pids);
      fill_id_set(skel->maps.filter_tids, opts.tids);
      fill_cgroup_set(bpf_map__fd(skel->maps.filter_cgroups), opts.cgroup_ids);
      auto session = std::unique_ptr<RwsemSession>(
          new RwsemSession(std::move(skel), plan, floor));
      session->wakers_ = opts.wakers;
      session->max_wait_ns_ = opts.max_wait_us * 1000;
      try {
        session->attach();
      } catch (const FatalError &e) {
        last_err = errno;
        note_failure(fallbacks, plan, last_err);
        failures += "; " + plan.describe() + ": " + e.what();
        if (verbose)
          fprintf(stderr, "offcpu: %s: %s; trying the next mechanism\n",
                  plan.describe().c_str(), e.what());
        continue;
      }
      if (verbose)
        fprintf(stderr, "offcpu: lock waits traced with %s%s\n",
                plan.describe().c_str(),
                futex(opts) ? "; futex waits from sched_switch (the system "
                              "call a sleeping thread is in)"
                            : "");
      if (fallbacks.any())
        warn(fallbacks.warning(plan.describe()));
      take_libbpf_messages();
      return session;
    }
    last_err = err;
    note_failure(fallbacks, plan, err);
    failures += "; " + plan.describe() + ": " + errno_text(err);
    if (verbose)
      fprintf(stderr,
              "offcpu: %s failed to load (%s); trying the next mechanism\n",
              plan.describe().c_str(), errno_text(err).c_str());
  }
  std::string log = take_libbpf_messages();
  if (verbose && !log.empty())
    fprintf(stderr, "%s", log.c_str());
  // We hold the capabilities (checked before), so a refusal here is the
  // kernel's policy for this kind of program (lockdown, no trampolines).
  // One mechanism asked for (tried with plain loads, then probe reads).
  bool one = std::all_of(plans.begin(), plans.end(), [&](const RwsemPlan &p) {
    return p.mechanism == plans[0].mechanism;
  });
  if (one && (last_err == -EPERM || last_err == -EACCES)) {
    RwsemPlan refused = plans[0];
    refused.direct_loads = false; // the mechanism, whichever object
    throw runtime_error("the kernel refused " + refused.describe() + " (" +
                        errno_text(last_err) + "); try --attach tracepoint");
  }
  throw runtime_error("cannot trace rwsem waits" + failures);
}

void RwsemSession::attach_one(bpf_program *prog, const char *what) {
  bpf_link *link = nullptr;
  if (plan_.mechanism == RwsemAttach::Kprobe) {
    bool ret = prog == skel_->progs.rwsem_kretprobe;
    bool read = prog == skel_->progs.rwsem_kprobe_read;
    const std::string &fn = prog == skel_->progs.mutex_kprobe
                                ? plan_.mutex_target
                            : read ? plan_.read_target
                                   : plan_.write_target;
    link = bpf_program__attach_kprobe(prog, ret, fn.c_str());
  } else {
    link = bpf_program__attach(prog);
  }
  if (!link)
    throw runtime_error(std::string("cannot attach ") + what + ": " +
                        errno_text(errno));
  links_.emplace_back(link);
  if (std::find(attached_.begin(), attached_.end(), prog) == attached_.end())
    attached_.push_back(prog);
}

std::vector<int> RwsemSession::hook_programs() const {
  const auto &p = skel_->progs;
  const bpf_program *begins[] = {p.rwsem_contention_begin,
                                 p.rwsem_fentry_write,
                                 p.rwsem_fentry_read,
                                 p.mutex_fentry,
                                 p.rwsem_kprobe_write,
                                 p.rwsem_kprobe_read,
                                 p.mutex_kprobe};
  auto begins_wait = [&](const bpf_program *prog) {
    return std::find(std::begin(begins), std::end(begins), prog) !=
           std::end(begins);
  };
  std::vector<bpf_program *> order = attached_;
  std::stable_partition(order.begin(), order.end(), begins_wait);
  std::vector<int> fds;
  for (const bpf_program *prog : order)
    fds.push_back(bpf_program__fd(prog));
  return fds;
}

std::pair<uint64_t, uint64_t> RwsemSession::kernel_stacks_at_begin() const {
  return {skel_->bss->lock_kstacks_walked, skel_->bss->lock_kstacks_reused};
}

bool RwsemSession::hooks_lead_with_contentions() const {
  return bpf_program__autoload(skel_->progs.rwsem_contention_begin) ||
         plan_.mechanism != RwsemAttach::Tracepoint;
}

// The waits' ends first and their begins last, just before the window's
// start (attached_ns_): a wait is never begun without its end attached
// (a thread's first wait would run on to its next end), nor before the
// window (the -v edges bpftrace comparisons clip to).
void RwsemSession::attach_begins() {
  auto &p = skel_->progs;
  switch (plan_.mechanism) {
  case RwsemAttach::Tracepoint:
    if (bpf_program__autoload(p.rwsem_contention_begin))
      attach_one(p.rwsem_contention_begin, "lock:contention_begin");
    break;
  case RwsemAttach::Fentry:
    attach_one(p.rwsem_fentry_write, "fentry");
    if (bpf_program__autoload(p.rwsem_fentry_read))
      attach_one(p.rwsem_fentry_read, "fentry (read)");
    if (bpf_program__autoload(p.mutex_fentry))
      attach_one(p.mutex_fentry, "fentry (mutex)");
    break;
  default:
    break;
  }
}

void RwsemSession::attach() {
  auto &p = skel_->progs;
  switch (plan_.mechanism) {
  case RwsemAttach::Tracepoint:
    if (!bpf_program__autoload(p.rwsem_contention_begin))
      break;
    attach_one(p.rwsem_contention_end, "lock:contention_end");
    break;
  case RwsemAttach::Fentry:
    attach_one(p.rwsem_fexit_write, "fexit");
    if (bpf_program__autoload(p.rwsem_fentry_read))
      attach_one(p.rwsem_fexit_read, "fexit (read)");
    if (bpf_program__autoload(p.mutex_fentry))
      attach_one(p.mutex_fexit, "fexit (mutex)");
    break;
  case RwsemAttach::Kprobe:
    attach_one(p.rwsem_kprobe_write, "kprobe");
    if (bpf_program__autoload(p.rwsem_kprobe_read))
      attach_one(p.rwsem_kprobe_read, "kprobe (read)");
    // One kretprobe per probed function: the return ends either wait.
    attach_one(p.rwsem_kretprobe, "kretprobe");
    if (bpf_program__autoload(p.rwsem_kprobe_read)) {
      bpf_link *link = bpf_program__attach_kprobe(p.rwsem_kretprobe, true,
                                                  plan_.read_target.c_str());
      if (!link)
        throw runtime_error("cannot attach kretprobe (read): " +
                            errno_text(errno));
      links_.emplace_back(link);
    }
    if (bpf_program__autoload(p.mutex_kprobe)) {
      attach_one(p.mutex_kprobe, "kprobe (mutex)");
      bpf_link *link = bpf_program__attach_kprobe(p.rwsem_kretprobe, true,
                                                  plan_.mutex_target.c_str());
      if (!link)
        throw runtime_error("cannot attach kretprobe (mutex): " +
                            errno_text(errno));
      links_.emplace_back(link);
    }
    break;
  default:
    break;
  }
  if (bpf_program__autoload(p.rwsem_waking))
    attach_one(p.rwsem_waking, "sched_waking");
  if (bpf_program__autoload(p.futex_switch))
    attach_futex();
  if (bpf_program__autoload(p.lock_fork)) {
    attach_one(p.lock_fork, "sched_process_fork");
    attach_one(p.lock_exit, "sched_process_exit");
  }
  attach_begins();
  attached_ns_ = monotonic_ns();
}

// The futex hooks (the iterator runs at stop).
void RwsemSession::attach_futex() {
  attach_one(skel_->progs.futex_switch, "sched_switch");
  attach_one(skel_->progs.futex_waking, "sched_waking");
}

bool RwsemSession::wait(uint64_t deadline,
                        const Announcements::NewStack &new_stack,
                        const Announcements::IdleWork &idle) {
  if (!announcements_) {
    announcements_ =
        std::make_unique<Announcements>(bpf_map__fd(skel_->maps.new_processes));
    if (skel_->rodata->uw_tables && unwind_request_)
      announcements_->add_requests(bpf_map__fd(skel_->maps.uw_requests),
                                   unwind_request_);
  }
  return announcements_->wait(deadline, new_stack, idle);
}

bool RwsemSession::unwind_tables() const {
  return skel_->rodata->uw_tables;
}

UnwindMapFds RwsemSession::unwind_maps() const {
  return {bpf_map__fd(skel_->maps.uw_procs), bpf_map__fd(skel_->maps.uw_files),
          bpf_map__fd(skel_->maps.uw_pages), bpf_map__fd(skel_->maps.uw_rows),
          bpf_map__fd(skel_->maps.uw_rules)};
}

void RwsemSession::add_process(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.filter_tgids), &tgid, &one,
                          BPF_ANY) != 0)
    throw runtime_error("cannot trace PID " + std::to_string(tgid) + ": " +
                        errno_text(errno));
}

StackMaps RwsemSession::stack_maps() const {
  return {bpf_map__fd(skel_->maps.stacks),
          bpf_map__fd(skel_->maps.deep_stacks)};
}

std::vector<uint64_t> RwsemSession::read_stack(uint64_t id) const {
  return offcpu::read_stack(stack_maps(), id);
}

// Every slab cache's name by address, from the kmem_cache iterator (the
// caches the waits name: a cache created meanwhile is named next time).
void RwsemSession::read_slab_names(RawLockWaits &out) const {
  bool any = false;
  for (const auto &kv : out.waits)
    any = any || kv.first.cache;
  if (!any || !bpf_program__autoload(skel_->progs.slab_names))
    return;
  BpfLink link(bpf_program__attach_iter(skel_->progs.slab_names, nullptr));
  if (!link.get())
    return; // then named by address
  UniqueFd fd(bpf_iter_create(bpf_link__fd(link.get())));
  if (fd.get() < 0)
    return;
  offcpu_slab_name rec{};
  std::string buf;
  char chunk[4096];
  for (ssize_t n; (n = read(fd.get(), chunk, sizeof(chunk))) > 0;)
    buf.append(chunk, static_cast<size_t>(n));
  for (size_t at = 0; at + sizeof(rec) <= buf.size(); at += sizeof(rec)) {
    memcpy(&rec, buf.data() + at, sizeof(rec));
    out.slab_caches[rec.cache] =
        std::string(rec.name, strnlen(rec.name, sizeof(rec.name)));
  }
}

namespace {

// Takes every (key, value) of an aggregation map into `out`, each key
// under the report's key `report(k)`.
template <typename Key, typename Report>
void take_waits(int fd, RawLockWaits &out, Report report) {
  for (const Key &k : map_keys<Key>(fd)) {
    rwsem_value val{};
    // Atomic take (5.14+); older kernels: read, then delete.
    if (bpf_map_lookup_and_delete_elem(fd, &k, &val) != 0) {
      if (bpf_map_lookup_elem(fd, &k, &val) != 0)
        continue;
      bpf_map_delete_elem(fd, &k);
    }
    out.waits.emplace_back(report(k), val);
  }
}

// A wait of `delta` ns charged at stop, with its stacks and waker to read.
void add_open_wait(RawLockWaits &out, const rwsem_key &key, uint64_t delta,
                   std::vector<uint64_t> &ids,
                   std::vector<uint64_t> &waker_ids) {
  rwsem_value val{delta, 1, delta, {}};
  val.hist[offcpu_hist_bucket(delta)] = 1;
  out.waits.emplace_back(key, val);
  ids.push_back(key.user_stack);
  ids.push_back(key.kernel_stack);
  waker_ids.push_back(key.waker);
}

} // namespace

RawLockWaits RwsemSession::drain() {
  RawLockWaits out;
  out.holder_stacks = wakers_;
  take_waits<rwsem_key>(bpf_map__fd(skel_->maps.waits), out,
                        [](const rwsem_key &k) { return k; });
  // The threads' pending futex waits join the map first (futex.bpf.h):
  // while the hooks run, with the switch-ins taking the threads' locks,
  // from once every run that did not has ended.
  if (bpf_program__autoload(skel_->progs.futex_open)) {
    auto &draining = skel_->bss->futex_draining;
    bool waited = false;
    if (!links_.empty() && !draining) {
      __atomic_store_n(&draining, 1, __ATOMIC_SEQ_CST);
      // If it fails, the switch-ins keep locking from now on.
      waited = syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0;
    }
    futex_pass();
    if (waited)
      __atomic_store_n(&draining, 0, __ATOMIC_SEQ_CST);
  }
  // The map's holder is never 0 (OFFCPU_WAKER_UNSEEN when none was seen).
  take_waits<offcpu_futex_key>(
      bpf_map__fd(skel_->maps.futex_waits), out,
      [](const offcpu_futex_key &k) { return offcpu_futex_key_of(&k, 0); });
  for (int i = 0; i < OFFCPU_LOST_NR; i++)
    out.lost[i] = skel_->bss->lost[i];
  std::vector<uint64_t> ids, waker_ids;
  for (const auto &kv : out.waits) {
    ids.push_back(kv.first.user_stack);
    ids.push_back(kv.first.kernel_stack);
    waker_ids.push_back(kv.first.waker);
  }
  read_wakers(bpf_map__fd(skel_->maps.wakers), waker_ids, out.wakers, ids);
  read_stacks(stack_maps(), ids, out.stacks);
  read_slab_names(out);
  return out;
}

// The waits open now, by thread: from the task iterator over the threads'
// task storage, or from the hash map.
std::vector<std::pair<uint32_t, rwsem_start>> RwsemSession::open_waits() const {
  std::vector<std::pair<uint32_t, rwsem_start>> out;
  if (!plan_.task_storage) {
    int fd = bpf_map__fd(skel_->maps.starts);
    for (uint32_t tid : map_keys<uint32_t>(fd)) {
      rwsem_start rec{};
      if (bpf_map_lookup_elem(fd, &tid, &rec) == 0)
        out.emplace_back(tid, rec);
    }
    return out;
  }
  BpfLink link(bpf_program__attach_iter(skel_->progs.lock_open_waits, nullptr));
  UniqueFd fd(link ? bpf_iter_create(bpf_link__fd(link.get())) : -1);
  if (fd.get() < 0) {
    warn("cannot list the lock waits still open (" + errno_text(errno) +
         "): not charged");
    return out;
  }
  std::string buf;
  char chunk[4096];
  for (ssize_t n; (n = read(fd.get(), chunk, sizeof(chunk))) > 0;)
    buf.append(chunk, static_cast<size_t>(n));
  constexpr size_t kRecord = sizeof(uint64_t) + sizeof(rwsem_start);
  for (size_t at = 0; at + kRecord <= buf.size(); at += kRecord) {
    uint64_t tid = 0;
    rwsem_start rec{};
    memcpy(&tid, buf.data() + at, sizeof(tid));
    memcpy(&rec, buf.data() + at + sizeof(tid), sizeof(rec));
    out.emplace_back(static_cast<uint32_t>(tid), rec);
  }
  return out;
}

// A pass of the futex_open iterator over every thread: it moves their
// pending futex waits into futex_waits and lists those still asleep.
std::string RwsemSession::futex_pass() const {
  std::string bytes;
  bpf_link *link = bpf_program__attach_iter(skel_->progs.futex_open, nullptr);
  if (!link) {
    warn("cannot run the futex pass (" + errno_text(errno) +
         "): the threads' latest futex waits are not reported");
    return bytes;
  }
  BpfLink held(link);
  UniqueFd fd(bpf_iter_create(bpf_link__fd(link)));
  char buf[4096];
  ssize_t n;
  while (fd && ((n = read(fd.get(), buf, sizeof(buf))) > 0 ||
                (n < 0 && errno == EINTR)))
    if (n > 0)
      bytes.append(buf, static_cast<size_t>(n));
  return bytes;
}

// The futex_open iterator's records: every futex waiter still asleep.
std::vector<offcpu_futex_start> RwsemSession::futex_asleep() const {
  std::vector<offcpu_futex_start> out;
  const std::string bytes = futex_pass();
  for (size_t at = 0; at + sizeof(offcpu_futex_start) <= bytes.size();
       at += sizeof(offcpu_futex_start)) {
    offcpu_futex_start w;
    std::memcpy(&w, bytes.data() + at, sizeof(w));
    out.push_back(w);
  }
  return out;
}

RawLockWaits RwsemSession::stop_and_drain() {
  uint64_t now = monotonic_ns();
  // Ended by a signal: at its time, not when the loop got to it.
  if (uint64_t at = stop_signal_ns(); at && at < now)
    now = std::max(at, attached_ns_);
  stopped_ns_ = now;
  // The programs end the window here: the detach below takes milliseconds
  // (more on a busy host), and waits beginning or ending meanwhile would
  // be counted past it.
  skel_->bss->stop_ns = now;
  links_.clear(); // waits for programs in flight
  RawLockWaits out = drain();
  // Waits still open: the thread is blocked on the lock right now. Charge
  // them up to the end, or the worst one would vanish from the report;
  // one already past -M can only end longer, so it is not.
  std::vector<uint64_t> ids, waker_ids;
  auto counts = [this](uint64_t delta) {
    return delta >= min_wait_ns_ && delta <= max_wait_ns_;
  };
  for (const auto &[tid, rec] : open_waits()) {
    if (rec.start_ns >= now || !counts(now - rec.start_ns))
      continue;
    uint64_t delta = now - rec.start_ns;
    rwsem_key key = rwsem_key_of(&rec, tid);
    if (wakers_ && !key.waker)
      key.waker = OFFCPU_WAKER_STILL_WAITING;
    add_open_wait(out, key, delta, ids, waker_ids);
  }
  // Futex waiters asleep now: charged up to the end too.
  if (bpf_program__autoload(skel_->progs.futex_open))
    for (const offcpu_futex_start &w : futex_asleep())
      if (w.since_ns < now && counts(now - w.since_ns))
        add_open_wait(out,
                      offcpu_futex_key_of(&w.key, OFFCPU_WAKER_STILL_WAITING),
                      now - w.since_ns, ids, waker_ids);
  read_wakers(bpf_map__fd(skel_->maps.wakers), waker_ids, out.wakers, ids);
  read_stacks(stack_maps(), ids, out.stacks);
  read_slab_names(out);
  return out;
}

} // namespace offcpu
