// Lifecycle of the off-CPU BPF programs: open, configure, load (falling back
// along the attach plans), attach, stop, drain.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collect/announcements.h"
#include "collect/bpf_util.h"
#include "collect/offcpu_objects.h"
#include "collect/raw_profile.h"
#include "collect/split_loader.h"
#include "collect/timeline_events.h"
#include "collect/trace_config.h"
#include "offcpu/python.h"
#include "offcpu/unwind.h"
#include "probe/features.h"
#include "probe/unwind_maps.h"
#include "util/fd.h"

struct offcpu_bpf;
struct offcpu_light;

namespace offcpu {

class EdgeLoader;
class LoadFallbacks;

class OffcpuSession {
public:
  // Loads with the first plan that the kernel accepts; throws FatalError
  // naming the cause when none does. Progress notes go to `log` (-v).
  static std::unique_ptr<OffcpuSession>
  load(const OffcpuConfig &opts, const std::vector<OffcpuPlan> &plans,
       bool verbose);
  ~OffcpuSession();
  OffcpuSession(const OffcpuSession &) = delete;
  OffcpuSession &operator=(const OffcpuSession &) = delete;

  // Attaches to sched_switch: the window opens then and, with a duration
  // (seconds, < 0: none), closes exactly that much later in the kernel,
  // however long seeding or user space take.
  void attach(double duration_s);
  // Opens waits for the tasks already off CPU at the attach (the hooks see
  // every later one), then fills in their user stacks (or, with the edges
  // after the attach, leaves them to start_edges()). Right after attach.
  void seed_open_waits();
  // Starts loading the window edges' iterators on a thread of their own,
  // where they load after the attach; then their pass over the waits
  // seeded. After seed_open_waits().
  void start_edges();
  // When the window opened and when it is planned to close (0: at stop()),
  // CLOCK_MONOTONIC ns.
  uint64_t window_start_ns() const { return start_ns_; }
  uint64_t planned_stop_ns() const { return planned_stop_ns_; }
  // The programs' end of the window (their stop_ns), for a signal handler
  // to close it at once (WindowEndOnSignal).
  volatile uint64_t *window_end_word();
  // Waits until `deadline_ns` (CLOCK_MONOTONIC; 0: no limit) or until a
  // stop is requested,
  // handing each (process, user stack) seen for the first time to
  // `new_stack` while that stack is current (`parent`: see
  // offcpu_new_stack). Between polls, `idle(deadline_ns)` does deferred
  // work in slices; it returns true when none is left. True when stopped
  // by a signal.
  using NewStack = Announcements::NewStack;
  using IdleWork = Announcements::IdleWork;
  using Finished = Announcements::Finished;
  bool wait(uint64_t deadline_ns, const NewStack &new_stack,
            const IdleWork &idle, const Finished &finished = {});
  // After stop(): the announcements wait() left unread (see Announcements).
  void read_announced(const NewStack &new_stack);
  // Traces this process from now on (and, following children, what it
  // forks); for a command started by offcpu.
  void add_process(uint32_t tgid);
  // Where the walker asks for a process's unwind tables; set before wait().
  void on_unwind_request(Announcements::Request cb) {
    unwind_request_ = std::move(cb);
  }
  // An eventfd whose count ends wait()'s polls early (see
  // Announcements::wake_on); set before wait().
  void wake_on(int event_fd) { wake_fd_ = event_fd; }
  // The ring of the walker's table requests (struct uw_request), for a
  // reader of its own rather than on_unwind_request.
  int unwind_requests_fd() const { return h_.fd.uw_requests; }
  // The unwind maps, for the Unwinder to fill (plan().user_unwind_tables).
  const UnwindMapFds &unwind_maps() const { return h_.unwind; }
  // Walks again the user stacks of blocked threads walked before their
  // tables were ready (the sleepable seeding iterator). True if some were
  // left for another pass (their process was changing its memory map).
  bool rewalk_user_stacks();
  // The attached programs that run per event, sched_switch first.
  std::vector<int> hook_programs() const {
    return {h_.switch_prog, waking_ ? h_.waking_prog : -1,
            forks_ ? h_.fork_prog : -1};
  }
  // The user-stack walker's counters (enum uw_stat), summed over CPUs.
  std::array<uint64_t, UW_STAT_NR> unwind_counters() const;
  // A process looked at for a Python interpreter (issue #32): its runtime
  // for the BPF walker, or runtime 0 for any other process.
  void set_python(uint32_t tgid, const offcpu_py_proc &p);
  // The Python walker's counters (enum offcpu_py_stat), summed over CPUs.
  std::array<uint64_t, OFFCPU_PY_STAT_NR> python_counters() const;
  // A stored stack's frames (leaf first); empty if unknown.
  std::vector<uint64_t> read_stack(uint64_t id) const;
  // Ends the window: waits end now; the switch hook is detached and waits
  // still open are charged up to this moment.
  void stop();
  // When the edges' iterators that load after the attach were ready
  // (CLOCK_MONOTONIC ns; 0: none, or not yet): a stop before waits for
  // them, and the time given to naming counts from then.
  uint64_t edges_ready_ns() const;
  // Copies the aggregated data out of the maps.
  RawProfile drain() const;
  // The timeline's events (after stop), and the stacks and wakers they
  // refer to added to `raw` (from drain()).
  RawTimeline take_events(RawProfile &raw);

  const OffcpuPlan &plan() const { return plan_; }

  // What the session uses once loaded, from either skeleton.
  struct Handles {
    offcpu_fds fd{}; // every map and program (collect/offcpu_objects.h)
    // The plan's hooks (BTF-enabled tracepoints or raw ones).
    int switch_prog = -1, waking_prog = -1, fork_prog = -1;
    UnwindMapFds unwind;
    void *bss = nullptr; // the object's .bss, mapped
  };

  struct Progress {
    uint64_t waits = 0; // waits charged so far
    uint64_t keys = 0;  // distinct thread/stack pairs
  };
  Progress progress() const;
  offcpu_charged charged() const;

private:
  StackMaps stack_maps() const { return {h_.fd.stacks, h_.fd.deep_stacks}; }
  // At stop: the user stacks still left for a switch-in, while blocked.
  void take_deferred_stacks();
  // The stop pass when the edges' iterators failed to load.
  void release_without_flush();
  // Detaches the hooks.
  void detach();
  // Starts loading the edges' iterators (plan_.edges_after_attach).
  void load_edges();
  // The seeding/rewalk iterator, or (flush) the stop pass's; -1 if it failed
  // to load. Waits for its load.
  int edge_program(bool flush);
  struct SkelDeleter {
    void operator()(offcpu_bpf *skel) const;
  };
  struct LightDeleter {
    void operator()(offcpu_light *l) const;
  };
  OffcpuSession(OffcpuPlan plan, bool verbose);
  // The split load (collect/split_loader.h); nullptr where it failed, said
  // in `fallbacks` (direct_failed: the light object with plain loads did).
  static std::unique_ptr<OffcpuSession>
  load_split(const OffcpuConfig &opts, const OffcpuPlan &plan, bool verbose,
             LoadFallbacks &fallbacks, bool &direct_failed);
  void take(std::unique_ptr<offcpu_bpf, SkelDeleter> skel);
  // With `programs`, the split load's: the light object holds the maps only.
  bool take(std::unique_ptr<offcpu_light, LightDeleter> light,
            std::unique_ptr<SplitPrograms> programs = nullptr);
  // What the options ask of a loaded session: hooks, filters, the edges'
  // late load, the timeline's reader.
  void configure(const OffcpuConfig &opts);
  // The handles from either skeleton's descriptors and mapped .bss.
  void set_handles(const offcpu_fds &fds, void *bss);

  std::unique_ptr<offcpu_bpf, SkelDeleter> skel_;
  std::unique_ptr<offcpu_light, LightDeleter> light_;
  std::unique_ptr<SplitPrograms> split_; // the split load's programs
  // The edges' iterators when they load after the attach; before the light
  // object and the split programs, whose maps its thread uses, in
  // destruction order.
  std::unique_ptr<EdgeLoader> edges_;
  offcpu_settings edge_settings_{}; // their settings, kept from the load
  bool edges_fail_ = false;         // --fail-load edges
  ShareLoader edges_loader_ = ShareLoader::Generated; // --fail-load generated
  uint32_t edges_delay_ms_ = 0;                       // --delay-edges
  Handles h_;
  OffcpuPlan plan_;
  bool verbose_;
  UniqueFd switch_link_; // closing it detaches
  UniqueFd waking_link_; // --wakers, --runqueue
  bool waking_ = false;  // the sched_waking hook is wanted
  UniqueFd fork_link_;   // --children, -- COMMAND
  bool forks_ = false;
  std::unique_ptr<Announcements> announcements_;
  std::unique_ptr<EventReader> events_; // the timeline's, when asked for
  Announcements::Request unwind_request_;
  int wake_fd_ = -1;
  uint64_t start_ns_ = 0;
  uint64_t planned_stop_ns_ = 0;
  uint64_t stop_ns_ = 0;
};

} // namespace offcpu
