// Lifecycle of the rwsem-wait BPF programs: load along the plans, attach,
// drain per interval, stop and charge the waits still open.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "collect/announcements.h"
#include "collect/bpf_util.h"
#include "collect/raw_profile.h"
#include "collect/trace_config.h"
#include "probe/features.h"

struct rwsem_bpf;

namespace offcpu {

class RwsemSession {
public:
  static std::unique_ptr<RwsemSession> load(const RwsemConfig &opts,
                                            const std::vector<RwsemPlan> &plans,
                                            bool verbose);
  ~RwsemSession();
  RwsemSession(const RwsemSession &) = delete;
  RwsemSession &operator=(const RwsemSession &) = delete;

  void attach();
  // Until `deadline_ns` (0: none) or a stop request, handing new (process,
  // user stack) pairs to `new_stack` (see Announcements). True when stopped
  // by a signal.
  bool wait(uint64_t deadline_ns, const Announcements::NewStack &new_stack,
            const Announcements::IdleWork &idle);
  // The announcements wait() left unread (see Announcements::read_backlog).
  void read_announced(const Announcements::NewStack &new_stack) {
    if (announcements_)
      announcements_->read_backlog(new_stack);
  }
  // User stacks through unwind tables: the maps to fill, and where the
  // walker asks for a process's tables (set before wait()).
  bool unwind_tables() const;
  UnwindMapFds unwind_maps() const;
  void on_unwind_request(Announcements::Request cb) {
    unwind_request_ = std::move(cb);
  }
  // Traces this process too (-- COMMAND: the command, before its exec).
  void add_process(uint32_t tgid);
  // A stored stack's frames (leaf first); empty if unknown.
  std::vector<uint64_t> read_stack(uint64_t id) const;
  // Takes what was aggregated since the last drain, clearing it.
  RawLockWaits drain();
  // Detaches, then adds every wait still open, charged up to now.
  RawLockWaits stop_and_drain();

  const RwsemPlan &plan() const { return plan_; }
  // The attached programs that run per event (for their cost), the ones
  // that begin a wait first: their runs are the contentions. With --futex
  // alone, the sched_switch program leads.
  std::vector<int> hook_programs() const;
  // Whether the leading program's runs are lock contentions (else context
  // switches: --futex alone).
  bool hooks_lead_with_contentions() const;
  // Kernel stacks taken at waits' begins: walked, and reused from the
  // thread's memo (bpf/rwsem.bpf.c).
  std::pair<uint64_t, uint64_t> kernel_stacks_at_begin() const;
  // The traced window, CLOCK_MONOTONIC ns (bpf_ktime_get_ns's clock).
  uint64_t attached_ns() const { return attached_ns_; }
  uint64_t stopped_ns() const { return stopped_ns_; }

private:
  struct SkelDeleter {
    void operator()(rwsem_bpf *skel) const;
  };
  RwsemSession(std::unique_ptr<rwsem_bpf, SkelDeleter> skel, RwsemPlan plan,
               uint64_t min_wait_ns);
  void attach_one(bpf_program *prog, const char *what);
  void attach_begins();
  void attach_futex();
  std::vector<offcpu_futex_start> futex_asleep() const;
  // Runs the futex_open iterator; its records (empty if it cannot run).
  std::string futex_pass() const;
  void read_slab_names(RawLockWaits &out) const;
  StackMaps stack_maps() const;
  std::vector<std::pair<uint32_t, rwsem_start>> open_waits() const;

  std::unique_ptr<rwsem_bpf, SkelDeleter> skel_;
  RwsemPlan plan_;
  uint64_t min_wait_ns_;
  uint64_t max_wait_ns_ = UINT64_MAX; // -M: also for waits open at stop
  bool wakers_ = false; // --wakers: waits still open get [still waiting]
  std::vector<BpfLink> links_;
  std::vector<bpf_program *> attached_; // each once, in attach order
  std::unique_ptr<Announcements> announcements_;
  Announcements::Request unwind_request_;
  uint64_t attached_ns_ = 0;
  uint64_t stopped_ns_ = 0;
};

} // namespace offcpu
