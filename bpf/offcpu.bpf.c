// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Off-CPU time, aggregated in the kernel by (process, thread, comm, stacks).
 *
 * A task's wait starts when it is switched out and ends when it is switched
 * back in. Everything a filter can reject is rejected before a stack is
 * walked. Task iterators close the gaps at the window's edges: two open a
 * wait for every task already off CPU when tracing starts (then fill in its
 * user stack), one charges the waits still open when it stops. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "id_set.bpf.h"
#include "kernel_unwind.bpf.h"
#include "offcpu/shared.h"
#include "stack_store.bpf.h"
/* After stack_store.bpf.h: counts its losses there. */
#include "announce.bpf.h"
#include "task_comm.bpf.h"
#include "user_unwind.bpf.h"

#define PF_KTHREAD 0x00200000
#define TASK_DEAD 0x00000080

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Knobs: set by the loader in .rodata before load; the verifier treats them
 * as constants and drops the branches they disable. */
const volatile bool filter_tgid = false;
const volatile bool filter_tid = false;
const volatile bool user_threads_only = false;
const volatile bool kernel_threads_only = false;
const volatile bool want_user_stacks = true;
const volatile bool want_kernel_stacks = true;
const volatile __u64 min_block_ns = 1000;
const volatile __u64 max_block_ns = ~0ULL;
const volatile __s64 state_filter = -1; /* < 0: no state filter */
/* --state by name: a set of offcpu_state_class bits (0: not used). */
const volatile __u32 state_classes = 0;
/* --show-state: the state class is part of the key (an annotation frame). */
const volatile bool show_state = false;
/* --children, -- COMMAND: processes forked by traced ones are traced too
 * (the fork hook adds them to filter_tgids; they leave it at their last
 * switch-out). */
const volatile bool follow_children = false;
/* -n NAME: the process name (its main thread's comm), exact. */
const volatile bool filter_name = false;
const volatile char target_name[OFFCPU_COMM_LEN] = {};
/* --cgroup: only tasks in these cgroups (v2) or below; --per-cgroup: the
 * cgroup is part of the key. */
const volatile bool filter_cgroup = false;
const volatile bool key_cgroup = false;
/* --wakers: who woke each wait; --runqueue: when, to split the wait into
 * blocked and runnable time. --wakers needs the sched_waking hook, attached
 * only then; --runqueue reads when the task was queued from the scheduler's
 * own accounting at switch-in (runq_from_sched_info), and uses the hook
 * only on kernels without it. */
const volatile bool want_wakers = false;
const volatile bool split_runqueue = false;
const volatile bool runq_from_sched_info = false;
/* 5.18+ passes prev_state to sched_switch; older kernels read the task. */
const volatile bool has_prev_state_arg = true;
/* The kernel stack of a task being switched in is still frozen where it
 * blocked: with the ORC walker (kernel_unwind.bpf.h) it is taken then, only
 * for waits that passed -m/-M. Otherwise it is taken at switch-out. */
const volatile bool kstack_at_switch_in = false;
/* Task storage (5.11+) has no size limit and frees itself on exit; older
 * kernels use the starts_hash map, which can fill up. */
const volatile bool use_task_storage = true;
/* Waits held in the thread's task storage at its last two keys (see
 * charge): with task storage and the flush iterator that adds what threads
 * hold at stop. */
const volatile bool hold_waits = false;

/* Walk user frame pointers ourselves rather than through bpf_get_stack
 * (needs bpf_get_current_task_btf 5.11 and bpf_task_pt_regs 5.15). */
const volatile bool user_fp_walk = true;

/* Written by user space: when the window ends, set when it opens for a
 * timed run (so it ends on time however late user space wakes up on a busy
 * host), or at Ctrl-C. Waits end there; none opens after it. */
__u64 stop_ns = 0;
/* Written by user space right after attaching: when the window opened. */
__u64 window_start_ns = 0;
/* Waits added to `counts` so far (the progress line) and their time by
 * state class; per CPU, so the hot path shares no cache line between CPUs. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct offcpu_charged);
} waits_charged SEC(".maps");

/* A task field: a plain load through a trusted BTF pointer (tp_btf,
 * iterators), a probe read otherwise (raw_tp). `trusted` is a compile-time
 * constant, so only one of the two is emitted. */
#define TASK_FIELD(trusted, t, field)                                          \
  ((trusted) ? (t)->field : BPF_CORE_READ(t, field))

ID_SET_MAP(filter_tgids);

ID_SET_MAP(filter_tids);

/* --cgroup: cgroup v2 ids (u64 -> u8), filled by the loader. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader */
  __type(key, __u64);
  __type(value, __u8);
} filter_cgroups SEC(".maps");

/* Cgroups nest at most this deep below a --cgroup for a task to match. */
#define CGROUP_MAX_DEPTH 16

static __always_inline __u64 task_cgroup_id(struct task_struct *t) {
  return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* The task's cgroup or one of its ancestors is in filter_cgroups. */
static __always_inline bool in_filter_cgroups(struct task_struct *t) {
  struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
  for (int i = 0; i < CGROUP_MAX_DEPTH && cg; i++) {
    __u64 id = BPF_CORE_READ(cg, kn, id);
    if (bpf_map_lookup_elem(&filter_cgroups, &id))
      return true;
    /* self is the cgroup's first member: its parent css is the parent. */
    cg = (struct cgroup *)BPF_CORE_READ(cg, self.parent);
  }
  return false;
}

/* The process name is its main thread's comm (threads rename themselves). */
static __always_inline bool name_matches(struct task_struct *t) {
  char comm[OFFCPU_COMM_LEN];
  BPF_CORE_READ_STR_INTO(&comm, t, group_leader, comm);
  for (int i = 0; i < OFFCPU_COMM_LEN; i++) {
    if (comm[i] != target_name[i])
      return false;
    if (comm[i] == 0)
      return true;
  }
  return true;
}

/* A thread's waits at one key, held in its storage until they are added
 * to `counts` (see charge). */
struct offcpu_held {
  struct offcpu_key key;
  struct offcpu_value val; /* val.count 0: none held */
};

/* Two keys: a thread often alternates between two, e.g. blocking in a read
 * and being preempted in the write that wakes its peer. */
#define HELD_WAYS 2
struct offcpu_held_set {
  struct offcpu_held way[HELD_WAYS];
  __u32 last; /* the way charged last */
  __u32 pad;
};

/* Per thread: its open wait, the waits it holds and the memos of its last
 * user and kernel stacks. One task storage lookup at a switch serves all
 * of them. */
struct offcpu_task {
  struct offcpu_start start;
  struct offcpu_held_set held;
  struct uw_memo_set memo;
  struct kw_memo_set kmemo;
};

/* The per-thread state `rec` belongs to, where it is task storage. */
static __always_inline struct offcpu_task *task_of(struct offcpu_start *rec,
                                                   bool trusted) {
  return trusted && use_task_storage ? (struct offcpu_task *)rec : NULL;
}

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct offcpu_task);
} starts_task SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader when it is used */
  __type(key, __u32);
  __type(value, struct offcpu_start);
} starts_hash SEC(".maps");

/* Not preallocated: 65536 entries allocated and zeroed at load were a
 * tenth of the start-up time, and a run uses few. A wait adds at most two
 * (its own and an unseen one's) from the switch hook, which the kernel's
 * BPF allocator holds ready per CPU (4 prefilled, refilled after). The
 * stacks map stays preallocated (see stack_store.bpf.h). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536); /* resized by the loader */
  __type(key, struct offcpu_key);
  __type(value, struct offcpu_value);
} counts SEC(".maps");

struct task_struct___pre514 {
  long state;
} __attribute__((preserve_access_index));

/* The task's state field was renamed from state to __state in 5.14. */
static __always_inline unsigned int task_state(struct task_struct *t) {
  if (bpf_core_field_exists(t->__state))
    return BPF_CORE_READ(t, __state);
  return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

static __always_inline bool passes_task_filters(struct task_struct *t,
                                                __u32 pid, __u32 tgid,
                                                bool trusted) {
  if (pid == 0) /* the idle task, one per CPU */
    return false;
  if (filter_tgid && !bpf_map_lookup_elem(&filter_tgids, &tgid))
    return false;
  if (filter_tid && !bpf_map_lookup_elem(&filter_tids, &pid))
    return false;
  if (user_threads_only || kernel_threads_only) {
    bool kthread = TASK_FIELD(trusted, t, flags) & PF_KTHREAD;
    if (user_threads_only && kthread)
      return false;
    if (kernel_threads_only && !kthread)
      return false;
  }
  if (filter_name && !name_matches(t))
    return false;
  if (filter_cgroup && !in_filter_cgroups(t))
    return false;
  return true;
}

/* BCC semantics: --state 0 means preempted while runnable, any other value
 * is a bitmask tested against the state the task blocked in. By name, the
 * classes are exact: D does not include TASK_IDLE. */
static __always_inline bool passes_state_filter(unsigned int state) {
  if (state_classes)
    return state_classes & (1u << offcpu_state_class(state));
  if (state_filter < 0)
    return true;
  if (state_filter == 0)
    return state == 0;
  return (state & (__u64)state_filter) != 0;
}

/* `trusted` is a compile-time constant: true where the task pointer is a
 * BTF pointer the verifier accepts for task storage and task helpers
 * (tp_btf, iterators), false for raw_tp, where those paths are compiled out. */
static __always_inline struct offcpu_start *
find_start(struct task_struct *t, __u32 pid, bool trusted) {
  if (trusted && use_task_storage) {
    struct offcpu_task *ts = bpf_task_storage_get(&starts_task, t, 0, 0);
    return ts ? &ts->start : NULL;
  }
  return bpf_map_lookup_elem(&starts_hash, &pid);
}

static __always_inline bool save_start(struct task_struct *t, __u32 pid,
                                       const struct offcpu_start *rec,
                                       bool trusted) {
  if (trusted && use_task_storage) {
    struct offcpu_task *ts = bpf_task_storage_get(
        &starts_task, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!ts)
      return false;
    ts->start = *rec;
    return true;
  }
  return bpf_map_update_elem(&starts_hash, &pid, rec, BPF_ANY) == 0;
}

static __always_inline void forget_start(struct offcpu_start *rec, __u32 pid,
                                         bool trusted) {
  rec->start_ns = 0;
  if (!(trusted && use_task_storage))
    bpf_map_delete_elem(&starts_hash, &pid);
}

static __always_inline bool same_key(const struct offcpu_key *a,
                                     const struct offcpu_key *b) {
  return same_words(a, b, sizeof(*a));
}

/* Per process and thread name: the waits that found `counts` full (see
 * offcpu_overflow_key). Preallocated, as the stacks map: filled from the
 * switch hook. Past its size, waits are lost (OFFCPU_LOST_OVERFLOW_FULL). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct offcpu_overflow_key);
  __type(value, struct offcpu_value);
} counts_overflow SEC(".maps");

/* `n` waits of `key` that found the aggregation map full: into their
 * process's overflow bucket, or lost with their time if that is full too.
 * Inline (the light object may hold 32 functions at most), but off the
 * common path: only once the map is full. */
static __always_inline void add_to_overflow(const struct offcpu_key *key,
                                            __u64 ns, __u64 n, __u64 runq) {
  __sync_fetch_and_add(&lost[OFFCPU_LOST_AGG_MAP_FULL], n);
  __sync_fetch_and_add(&lost_ns[OFFCPU_LOST_AGG_MAP_FULL], ns);
  struct offcpu_overflow_key ok = {.tgid = key->tgid};
  __builtin_memcpy(ok.comm, key->comm, sizeof(ok.comm));
  struct offcpu_value empty = {};
  struct offcpu_value *o = lookup_or_insert(&counts_overflow, &ok, &empty, -1);
  if (!o) {
    __sync_fetch_and_add(&lost[OFFCPU_LOST_OVERFLOW_FULL], n);
    __sync_fetch_and_add(&lost_ns[OFFCPU_LOST_OVERFLOW_FULL], ns);
    return;
  }
  __sync_fetch_and_add(&o->total_ns, ns);
  __sync_fetch_and_add(&o->count, n);
  if (split_runqueue && runq)
    __sync_fetch_and_add(&o->runq_ns, runq);
}

/* Keys of `counts` the window may fill (0: all); the rest is kept for the
 * stop pass, which charges the threads still blocked at the end, as the
 * stack storage's (window_stack_limit). */
const volatile __u32 window_counts_limit = 0;
/* Keys inserted so far (bumped on an insert only). */
__u64 counts_keys = 0;

/* The value of `key` in `counts`, inserted empty if absent and there is
 * room; NULL if there is none. */
static __always_inline struct offcpu_value *
counts_entry(const struct offcpu_key *key) {
  struct offcpu_value *val = bpf_map_lookup_elem(&counts, key);
  if (val)
    return val;
  if (window_counts_limit && !(reserve_open & OFFCPU_RESERVE_HOOK) &&
      counts_keys >= window_counts_limit)
    return NULL;
  struct offcpu_value empty = {};
  long err = bpf_map_update_elem(&counts, key, &empty, BPF_NOEXIST);
  if (!err)
    __sync_fetch_and_add(&counts_keys, 1);
  else if (err != -OFFCPU_EEXIST) /* EEXIST: inserted by another CPU */
    return NULL;
  return bpf_map_lookup_elem(&counts, key);
}

/* Adds `n` waits of `key` to the aggregation map. */
static __always_inline void add_to_counts(const struct offcpu_key *key,
                                          __u64 ns, __u64 n, __u64 runq) {
  struct offcpu_value *val = counts_entry(key);
  if (!val) {
    add_to_overflow(key, ns, n, runq);
    return;
  }
  __sync_fetch_and_add(&val->total_ns, ns);
  __sync_fetch_and_add(&val->count, n);
  if (split_runqueue && runq)
    __sync_fetch_and_add(&val->runq_ns, runq);
}

/* Adds the waits `held` holds to the aggregation map, if it holds any. The
 * switch hook and the flush iterator may both try after stop: the one
 * that takes the count adds them. */
static __always_inline void release_held(struct offcpu_held *held,
                                         struct offcpu_charged *c) {
  __u64 n = held->val.count;
  if (!n || __sync_val_compare_and_swap(&held->val.count, n, 0) != n)
    return;
  add_to_counts(&held->key, held->val.total_ns, n, held->val.runq_ns);
  if (c) {
    c->held_waits -= n;
    c->held_ns -= held->val.total_ns;
  }
}

/* Charges a wait of `delta` ns (`runq` of them runnable) that began in
 * `state` to `key`, or, with `held` and no key, adds the waits it holds
 * to the aggregation map.
 *
 * With `held` (the thread's storage, from the switch hook while the window
 * is open), the wait is held there while the thread blocks at one of the
 * keys it holds, and added to the map with the others of its key when that
 * key makes way for a new one: a thread that blocks at the same places
 * again and again (an event loop, a worker on a condition variable, a
 * pipe) then costs a comparison of its key at most switches, not a hash
 * lookup of 64 bytes. What a thread holds is added when a new key takes
 * its place, at the thread's last switch-out (it is exiting), and at stop
 * (by the switch hook after the window closed, or the flush iterator);
 * what a thread freed without a last switch-out seen still held is counted
 * lost (offcpu_charged.held_waits).
 *
 * A global function: checked once, and the paths through it (the lookup,
 * the state class) do not multiply the paths the verifier follows through
 * the rest of the switch hook, which runs after a switch-in's charge. */
__noinline int charge(const struct offcpu_key *key, __u64 delta, __u64 runq,
                      __u32 state, struct offcpu_held_set *held) {
  __u32 zero = 0;
  struct offcpu_charged *c = bpf_map_lookup_elem(&waits_charged, &zero);
  if (!key) {
    if (held) {
      release_held(&held->way[0], c);
      release_held(&held->way[1], c);
    }
    return 0;
  }
  if (held) {
    /* Only the switch hook holds, and only while the window is open: no
     * other program touches what this thread holds meanwhile. */
    __u32 way = held->last & (HELD_WAYS - 1);
    struct offcpu_held *h = &held->way[way];
    if (!h->val.count || !same_key(&h->key, key)) {
      way ^= 1;
      h = &held->way[way];
      if (!h->val.count || !same_key(&h->key, key)) {
        /* The key used less recently makes way. The new one goes in the
         * map now, empty, so that the progress line counts it. */
        release_held(h, c);
        counts_entry(key); /* no room: counted when it is released */
        h->key = *key;
        h->val.total_ns = 0;
        h->val.runq_ns = 0;
        /* count last: 0 said "empty" while the key was written */
      }
      held->last = way;
    }
    h->val.total_ns += delta;
    h->val.runq_ns += runq;
    h->val.count += 1;
  } else {
    add_to_counts(key, delta, 1, runq);
  }
  if (c) {
    c->waits += 1;
    __u32 cls = offcpu_state_class(state);
    if (cls < OFFCPU_STATE_NR)
      c->state_ns[cls] += delta;
    if (held) {
      c->held_waits += 1;
      c->held_ns += delta;
    }
  }
  return 0;
}

/* When `t`, runnable, was queued, in ktime (`now`: the ktime matching its
 * run queue's clock); 0 where unknown. The scheduler keeps
 * sched_info.last_queued (rq_clock time) from the enqueue until the task
 * runs, and __schedule has just updated this run queue's clock when the
 * switch hook runs. Per-group run queues link to their CPU's (cfs_rq->rq,
 * CONFIG_FAIR_GROUP_SCHED, on in distribution kernels). */
static __always_inline __u64 queued_ktime(struct task_struct *t, __u64 now,
                                          bool trusted) {
  if (!bpf_core_field_exists(t->sched_info.last_queued) ||
      !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return 0;
  __u64 queued = TASK_FIELD(trusted, t, sched_info.last_queued);
  if (!queued)
    return 0;
  __u64 clock = trusted ? t->se.cfs_rq->rq->clock
                        : BPF_CORE_READ(t, se.cfs_rq, rq, clock);
  if (clock < queued || now < clock - queued)
    return 0;
  return now - (clock - queued);
}

/* Of a wait from `start` to `end` woken at `wake` (0: not seen), the part
 * spent runnable: all of it when the task was preempted (state 0). */
static __always_inline __u64 runnable_part(const struct offcpu_start *rec,
                                           __u64 wake, __u64 start, __u64 end) {
  if (rec->state == 0)
    return end - start;
  if (!wake || wake >= end)
    return 0;
  return end - (wake > start ? wake : start);
}

/* The user stack left for the switch-in (uw_can_defer) of a wait that
 * passed -m/-M: from the task's stack, unchanged since it blocked while
 * `frozen`; else (it ran unseen) missed, and counted. */
static __always_inline __u64 take_deferred_user_stack(struct task_struct *t,
                                                      __u32 tgid, __u32 flags,
                                                      struct uw_memo_set *ms,
                                                      bool frozen) {
  struct uw_stats *st = uw_stats_of(SCRATCH_HOOK);
  if (!frozen) {
    uw_count(st, UW_STAT_DEFER_LOST);
    return OFFCPU_STACK_MISSED;
  }
  uw_count(st, UW_STAT_DEFER_TAKEN);
  /* The memo it blocked with, if its words still hold (announced when it
   * was walked); with --verify-stack-reuse, compared with a walk. */
  __u64 memo =
      (flags & OFFCPU_USTACK_DEFERRED_ANY)
          ? OFFCPU_STACK_MISSED
          : uw_deferred_memo(ms, (flags & OFFCPU_USTACK_DEFERRED_WAY1) ? 1 : 0);
  if (memo != OFFCPU_STACK_MISSED && !reuse_verify) {
    uw_count(st, UW_STAT_REUSED);
    return memo;
  }
  __u32 partial = 0; /* it runs next: not walked again */
  bool reused = false;
  __u64 stack =
      walk_user_stack_hook(t, &partial, ms, &reused, true, SCRATCH_HOOK);
  if (memo != OFFCPU_STACK_MISSED && memo != stack)
    uw_count(st, UW_STAT_REUSE_MISMATCH);
  if (!reused && !announce(t, tgid, stack))
    uw_memo_forget(ms);
  return stack;
}

/* Ends a wait: applies -m/-M, takes the kernel stack if it was deferred and
 * adds the wait to its key. `slot`: the caller's scratch buffers. `frozen`:
 * the task has not run since the wait began, so its kernel stack is still
 * the one it blocked on. `open`: the switch hook runs before the window's
 * end, so the task's storage may hold the wait (see charge). */
static __always_inline void end_wait(struct task_struct *t, __u32 pid,
                                     struct offcpu_start *rec, __u64 end,
                                     bool trusted, __u32 slot, bool frozen,
                                     bool open) {
  __u64 start = rec->start_ns;
  /* Claimed meanwhile by the other of hook and flush (see below): a start
   * of 0 would make a wait as long as the uptime. */
  if (!start)
    return;
  /* With stacks taken at switch-in, the flush at stop runs while the switch
   * hook is still attached (so no task runs off with its stack unwalked):
   * whichever of the two claims the record charges the wait, after walking
   * the stack, which was frozen if the claim succeeds. Not the hook while
   * the window is open: every hook that began before its end has returned
   * when the flush begins (see stop()), so the hook needs no atomic then. */
  bool claim = trusted && kstack_at_switch_in && use_task_storage && !open;
  __u64 delta = end > start ? end - start : 0;
  if (delta == 0 || delta < min_block_ns || delta > max_block_ns) {
    /* Outside -m/-M: nothing more to do, the common case with -m. */
    uw_partial_ended(rec->flags, slot);
    if (claim)
      __sync_val_compare_and_swap(&rec->start_ns, start, 0);
    else
      forget_start(rec, pid, trusted);
    return;
  }

  struct offcpu_key key = {};
  key.tgid = rec->tgid;
  key.pid = pid;
  key.user_stack = rec->user_stack;
  key.kernel_stack = rec->kernel_stack;
  key.flags = rec->flags & OFFCPU_KSTACK_NOSCHED;
  key.cgroup = rec->cgroup;
  if (show_state)
    key.flags |= (offcpu_state_class(rec->state) + 1) << OFFCPU_KEY_STATE_SHIFT;
  if (want_wakers) {
    key.waker = rec->waker;
    if (!key.waker)
      key.waker =
          rec->state == 0 ? OFFCPU_WAKER_PREEMPTED : OFFCPU_WAKER_UNSEEN;
  }
  unsigned int state = rec->state;
  __u64 runq = 0;
  if (split_runqueue && end > start) {
    __u64 wake = rec->wake_ns;
    if (!wake && runq_from_sched_info && rec->state != 0)
      wake = queued_ktime(t, end, trusted);
    runq = runnable_part(rec, wake, start, end);
  }
  if (!claim)
    forget_start(rec, pid, trusted);
  uw_partial_ended(rec->flags, slot);
  /* Memos are the switch hook's alone: the flush iterator may walk the
   * same task at once. */
  struct offcpu_task *ts = slot == SCRATCH_HOOK ? task_of(rec, trusted) : NULL;
  /* The flush finds none still deferred but those of tasks that ran
   * unseen: the rewalk iterator takes the others first (see stop()). */
  if (trusted && (rec->flags & OFFCPU_USTACK_DEFERRED))
    key.user_stack = take_deferred_user_stack(t, rec->tgid, rec->flags,
                                              ts ? &ts->memo : NULL,
                                              frozen && slot == SCRATCH_HOOK);
  if (trusted && kstack_at_switch_in && want_kernel_stacks) {
    key.kernel_stack = frozen ? take_frozen_kernel_stack(t, &key.flags, slot,
                                                         ts ? &ts->kmemo : NULL)
                              : OFFCPU_STACK_MISSED;
  }
  if (claim && __sync_val_compare_and_swap(&rec->start_ns, start, 0) != start)
    return;
  read_comm(key.comm, t, trusted);
  struct offcpu_held_set *held = hold_waits && ts ? &ts->held : NULL;
  if (held && !open) {
    /* After the window: what the task holds first, then no more holding. */
    charge(NULL, 0, 0, 0, held);
    held = NULL;
  }
  charge(&key, delta, runq, state, held);
}

/* ---- Switch-ins that sched_switch does not report ----
 * The hook ends every wait at the task's switch-in, so a wait still open
 * when its task is switched out again was ended by a switch the hook never
 * saw. Seen on the 6.18 VM kernels this project is developed on: no
 * sched_switch event at all (tp_btf, raw_tp and perf's tracepoint alike)
 * when the task switched out is a thread of the VM's init (global PID 1),
 * although rq->nr_switches and the next task's sched_info count the switch;
 * about 0.1% of waits there. Whatever the cause on other kernels, the
 * scheduler's own accounting tells when the task arrived: sched_info
 * (CONFIG_SCHED_INFO: schedstats or delay accounting, on in distribution
 * kernels) counts its switch-ins in pcount and stamps the last in
 * last_arrival, in rq_clock time (sched_clock), not bpf_ktime_get_ns time. */
__u64 switch_events[OFFCPU_EV_NR];

static __always_inline __u64 task_pcount(struct task_struct *t, bool trusted) {
  if (!bpf_core_field_exists(t->sched_info.pcount))
    return 0;
  return TASK_FIELD(trusted, t, sched_info.pcount);
}

/* The clock of the run queue `t` is on (rq_clock: sched_clock, refreshed by
 * update_rq_clock at the top of __schedule and at every tick); 0 where the
 * kernel has no per-group cfs_rq->rq link (CONFIG_FAIR_GROUP_SCHED off).
 * Reached through the task: `runqueues` is not a ksym without
 * CONFIG_KALLSYMS_ALL. */
static __always_inline __u64 rq_clock_of(struct task_struct *t) {
  if (!bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return 0;
  struct rq *rq = BPF_CORE_READ(t, se.cfs_rq, rq);
  return rq ? BPF_CORE_READ(rq, clock) : 0;
}

/* ---- The time of a switch ----
 * bpf_ktime_get_ns costs 45-85 ns in the switch hook on the VMs this was
 * measured on (the timekeeper's line is cold there), a quarter of the hook
 * with -m. The scheduler has just read a clock: __schedule updates its run
 * queue's (rq->clock, sched_clock) before it picks the next task. The hook
 * takes that, plus this CPU's offset to ktime, measured with
 * bpf_ktime_get_ns at most once a millisecond (the two clocks drift apart
 * by NTP's slew at most, 500 ppm: half a microsecond a millisecond). The
 * kernel's own per-task scheduler statistics (schedstat, delay accounting)
 * read the same clock at the same place, and share its one caveat: after a
 * wakeup that preempts, __schedule may skip the update (the enqueue just
 * read the clock), and the switch is stamped then, microseconds earlier.
 * Without a trusted task (raw_tp) or the cfs_rq->rq link
 * (CONFIG_FAIR_GROUP_SCHED off): bpf_ktime_get_ns. */
struct switch_clock {
  __u64 base; /* rq->clock when `off` was measured */
  __u64 off;  /* ktime - rq->clock, then */
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct switch_clock);
} switch_clocks SEC(".maps");

#define SWITCH_CLOCK_RESYNC_NS 1000000
/* Longer than a tick at HZ=100, the longest a run queue's clock goes
 * without an update on a CPU that is not idle. */
#define SWITCH_CLOCK_NEAR_STOP_NS 20000000

/* Now, in ktime, at a switch away from `prev` (the current task); its run
 * queue's clock in *clock (0: not read). */
static __always_inline __u64 switch_time(struct task_struct *prev, bool trusted,
                                         __u64 *clock) {
  *clock = 0;
  if (!trusted || !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return bpf_ktime_get_ns();
  struct cfs_rq *cq = prev->se.cfs_rq;
  struct rq *rq = cq ? cq->rq : NULL;
  __u32 zero = 0;
  struct switch_clock *c =
      rq ? bpf_map_lookup_elem(&switch_clocks, &zero) : NULL;
  if (!c)
    return bpf_ktime_get_ns();
  __u64 rq_now = rq->clock;
  *clock = rq_now;
  if (rq_now - c->base < SWITCH_CLOCK_RESYNC_NS)
    return rq_now + c->off;
  __u64 now = bpf_ktime_get_ns();
  c->base = rq_now;
  c->off = now - rq_now;
  return now;
}

/* When `t`, on CPU now (ktime `now`, its run queue's clock `clock`), last
 * arrived, in ktime: now - (clock - last_arrival), or, without sched_info
 * or a clock, now minus the CPU time it has had since it was picked. */
static __always_inline __u64 arrival_ktime(struct task_struct *t, __u64 now,
                                           __u64 clock) {
  __u64 ran = 0;
  __u64 arrived = 0;
  if (bpf_core_field_exists(t->sched_info.last_arrival))
    arrived = BPF_CORE_READ(t, sched_info.last_arrival);
  if (clock && arrived && clock >= arrived)
    ran = clock - arrived;
  else
    ran = BPF_CORE_READ(t, se.sum_exec_runtime) -
          BPF_CORE_READ(t, se.prev_sum_exec_runtime);
  return now > ran ? now - ran : 0;
}

/* Ends an open wait of `t`, which is on CPU now although its switch-in was
 * never seen: at its arrival, clamped into the wait. Its kernel stack, if
 * it was to be walked at switch-in, is gone: the task has run since. */
static __always_inline void end_unseen_wait(struct task_struct *t, __u32 pid,
                                            struct offcpu_start *rec, __u64 now,
                                            __u64 clock, __u64 stop,
                                            bool trusted, __u32 slot,
                                            bool open) {
  __u64 start = rec->start_ns;
  __u64 end = arrival_ktime(t, now, clock);
  if (end < start)
    end = start;
  if (end > now)
    end = now;
  if (stop && end > stop)
    end = stop;
  __sync_fetch_and_add(&switch_events[OFFCPU_EV_UNSEEN_SWITCH_IN], 1);
  end_wait(t, pid, rec, end, trusted, slot, false, open);
}

/* With -m above its default most waits end shorter (a pipe's, a lock's
 * hand-off) and are dropped at their switch-in: a thread's user stack is
 * then left for the switch-in without even looking for its memo, which the
 * switch-in's walk does for the waits that pass (through the page table).
 * Only for a thread walked whole before (a memo kept): the first walk of a
 * new thread stays at switch-out, where a walk without its process's
 * tables can be finished by the rewalk while it blocks. */
static __always_inline bool uw_defer_blind(struct uw_memo_set *ms) {
  return uw_defer && min_block_ns > 1000 && ms &&
         (ms->way[0].nr | ms->way[1].nr);
}

/* A dying thread's last switch-out (--children): if it was its process's
 * last thread (signal->live dropped to 0 in do_exit), the process leaves
 * the traced set, so that a new process given its PID later (PIDs are
 * reused) is not traced for it. Here rather than in a hook of its own on
 * sched_process_exit: the switch hook already tells a dying task apart, and
 * the light object has no room for another program. A process reaped
 * before its last switch-out (its parent ignores SIGCHLD) frees its PID a
 * few microseconds early: reusing it first takes the whole PID space. */
static __always_inline void leave_traced_set(struct task_struct *t,
                                             __u32 tgid) {
  if (BPF_CORE_READ(t, signal, live.counter) == 0)
    bpf_map_delete_elem(&filter_tgids, &tgid);
}

static __always_inline void on_switch(void *ctx, struct task_struct *prev,
                                      struct task_struct *next,
                                      unsigned int prev_state, bool trusted) {
  __u64 clock;
  __u64 now = switch_time(prev, trusted, &clock);
  __u64 stop = stop_ns;
  /* Near the window's end, ktime itself: the run queue's clock may lag by
   * up to a tick (see switch_time), and the flush relies on every hook
   * that saw the window open having begun before its end. */
  if (stop && now + SWITCH_CLOCK_NEAR_STOP_NS > stop)
    now = bpf_ktime_get_ns();
  /* Before the window's end: waits may be held (see charge). The flush at
   * stop runs after every hook that read an earlier time has returned. */
  bool open = !stop || now < stop;

  /* The task switched in: close its wait, if one is open. */
  __u32 next_pid = TASK_FIELD(trusted, next, pid);
  if (next_pid != 0) {
    struct offcpu_start *rec = find_start(next, next_pid, trusted);
    if (rec && rec->start_ns)
      end_wait(next, next_pid, rec, open ? now : stop, trusted, SCRATCH_HOOK,
               true, open);
  }

  /* The task switched out. A dying task's last switch-out (it has no
   * switch-in to end a wait): what it holds is added now, before its
   * storage goes with it. Whatever the filters say now: they may have
   * changed since it held (a process renamed, -n). */
  bool dying = prev_state & TASK_DEAD;
  if (dying && trusted && hold_waits) {
    struct offcpu_task *d = bpf_task_storage_get(&starts_task, prev, 0, 0);
    if (d)
      charge(NULL, 0, 0, 0, &d->held);
  }
  /* A wait of its still open was ended by a switch-in the hook did not see
   * (above): end it first. */
  __u32 pid = TASK_FIELD(trusted, prev, pid);
  __u32 tgid = TASK_FIELD(trusted, prev, tgid);
  bool traced = passes_task_filters(prev, pid, tgid, trusted);
  if (follow_children && dying)
    leave_traced_set(prev, tgid);
  if (!traced)
    return;
  /* With task storage, one lookup serves the open wait, the stack memos
   * and the new record. */
  struct offcpu_task *ts = NULL;
  struct offcpu_start *prev_open;
  if (trusted && use_task_storage) {
    ts = bpf_task_storage_get(&starts_task, prev, 0,
                              BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!ts) {
      count_loss(OFFCPU_LOST_START_STORE);
      return;
    }
    prev_open = &ts->start;
  } else {
    prev_open = find_start(prev, pid, trusted);
  }
  if (prev_open && prev_open->start_ns)
    end_unseen_wait(prev, pid, prev_open, now,
                    clock ? clock : rq_clock_of(prev), stop, trusted,
                    SCRATCH_HOOK, open && !dying);

  /* Open a wait if it passes the filters. */
  if (dying || !open || !passes_state_filter(prev_state))
    return;

  struct offcpu_start rec = {
      .start_ns = now,
      .cgroup = key_cgroup ? task_cgroup_id(prev) : 0,
      .pcount = task_pcount(prev, trusted),
      .tgid = tgid,
      .state = prev_state,
  };
  if (want_user_stacks && !(TASK_FIELD(trusted, prev, flags) & PF_KTHREAD)) {
    bool reused = false;
    struct uw_memo_set *memo = ts ? &ts->memo : NULL;
    __u32 way = 0;
    bool blind = trusted && user_fp_walk && uw_defer_blind(memo);
    if (blind || (trusted && user_fp_walk && uw_can_defer(prev, memo, &way))) {
      /* Taken at switch-in if the wait passes -m/-M. */
      rec.user_stack = OFFCPU_STACK_MISSED;
      rec.flags |= OFFCPU_USTACK_DEFERRED | (blind ? OFFCPU_USTACK_DEFERRED_ANY
                                             : way ? OFFCPU_USTACK_DEFERRED_WAY1
                                                   : 0);
      uw_count(uw_stats_of(SCRATCH_HOOK), UW_STAT_DEFERRED);
      reused = true; /* announced when its memo was walked */
    } else if (trusted && user_fp_walk)
      rec.user_stack =
          walk_user_stack_hook(bpf_get_current_task_btf(), &rec.flags, memo,
                               &reused, false, SCRATCH_HOOK);
    else
      rec.user_stack = take_current_stack(ctx, BPF_F_USER_STACK);
    /* A reused stack was announced when it was walked. */
    if (!reused && !announce(prev, tgid, rec.user_stack))
      uw_memo_forget(memo);
  }
  if (want_kernel_stacks && !(trusted && kstack_at_switch_in))
    rec.kernel_stack = take_current_stack(ctx, 0);
  if (ts)
    ts->start = rec;
  else if (!save_start(prev, pid, &rec, trusted))
    count_loss(OFFCPU_LOST_START_STORE);
}

/* ---- Wakeups (--wakers, --runqueue) ---- */

/* After the knobs it reads (want_user_stacks, user_fp_walk). */
#include "waker.bpf.h"

/* --wakers: each waker's stack memos (see take_waker). Task storage:
 * memory only for threads that wake a traced wait. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct waker_memo_set);
} waker_memos SEC(".maps");

static __always_inline struct waker_memo_set *
current_waker_memos(bool trusted) {
  if (!trusted || !use_task_storage || !reuse_stacks)
    return NULL;
  return bpf_task_storage_get(&waker_memos, bpf_get_current_task_btf(), 0,
                              BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* A task being woken: if one of our waits is open, note when (the start of
 * its run-queue time) and, with --wakers, who woke it. The first wakeup of
 * a wait counts; a task already runnable is not woken again. */
static __always_inline void on_waking(void *ctx, struct task_struct *p,
                                      bool trusted) {
  __u32 pid = TASK_FIELD(trusted, p, pid);
  if (pid == 0)
    return;
  struct offcpu_start *rec = find_start(p, pid, trusted);
  if (!rec || !rec->start_ns || rec->wake_ns)
    return;
  /* The time serves --runqueue and -m/-M. With neither set (-m at its
   * default of 1 us), none is read (bpf_ktime_get_ns costs up to 85 ns
   * here): a wait woken within 1 us is dropped at its switch-in anyway
   * unless it queued long enough to pass, and then its waker is right. */
  bool timed = split_runqueue || min_block_ns > 1000 || max_block_ns != ~0ULL;
  __u64 now = timed ? bpf_ktime_get_ns() : 1; /* 1: woken, time not read */
  rec->wake_ns = now;
  if (!want_wakers)
    return;
  if (timed) {
    __u64 waited = now > rec->start_ns ? now - rec->start_ns : 0;
    if (waited > max_block_ns)
      return; /* too long to be counted: no waker needed */
    if (waited < min_block_ns) {
      rec->waker = OFFCPU_WAKER_TOO_SHORT;
      return;
    }
  }
  rec->waker = take_waker(ctx, current_waker_memos(trusted), trusted);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(offcpu_waking_btf, struct task_struct *p) {
  on_waking(ctx, p, true);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
/* The raw_tp plan's counterpart (kernels with BTF but no working tp_btf). */
SEC("raw_tp/sched_waking")
int BPF_PROG(offcpu_waking_raw, struct task_struct *p) {
  on_waking(ctx, p, false);
  return 0;
}
#endif

/* ---- Children (--children, -- COMMAND) ---- */

/* A traced process forked a new one: trace it too, from its first
 * instruction (threads share the tgid and are traced already). */
static __always_inline void on_fork(__u32 parent_tgid, __u32 child_tgid) {
  if (parent_tgid == child_tgid ||
      !bpf_map_lookup_elem(&filter_tgids, &parent_tgid))
    return;
  __u8 one = 1;
  /* Full only with 65,536 traced processes alive (each leaves at exit):
   * the child is not traced, counted. */
  if (bpf_map_update_elem(&filter_tgids, &child_tgid, &one, BPF_ANY))
    count_loss(OFFCPU_LOST_CHILD_UNTRACED);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(offcpu_fork_btf, struct task_struct *parent,
             struct task_struct *child) {
  on_fork(parent->tgid, child->tgid);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(offcpu_fork_raw, struct task_struct *parent,
             struct task_struct *child) {
  on_fork(BPF_CORE_READ(parent, tgid), BPF_CORE_READ(child, tgid));
  return 0;
}
#endif

/* Preferred: BTF-enabled tracepoint (5.5+), typed and trusted pointers. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_btf, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  unsigned int prev_state =
      has_prev_state_arg ? (unsigned int)ctx[3] : task_state(prev);
  on_switch(ctx, prev, next, prev_state, true);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
/* Fallback for kernels without BTF-enabled tracepoints (< 5.5) or where
 * tp_btf fails to load: pointers are read with probe reads. */
SEC("raw_tp/sched_switch")
int BPF_PROG(offcpu_switch_raw, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  unsigned int prev_state =
      has_prev_state_arg ? (unsigned int)ctx[3] : task_state(prev);
  on_switch(ctx, prev, next, prev_state, false);
  return 0;
}
#endif

/* Waits already in progress when tracing starts, in two passes. Without
 * them a thread blocked for the whole window (the one the user most needs
 * to see) would never show up.
 *
 * 1. offcpu_seed_open (right after attach, not sleepable, fast): every task
 *    off CPU without a record gets one, starting when the window opened.
 *    No record and off CPU means off CPU since before the window opened: had
 *    it run since, its switch-out would have left a record.
 * 2. offcpu_seed_stacks (sleepable, 5.18+): fills in the user stacks of
 *    those records, walking each task's frame pointers in its own memory.
 *    That can fault and sleep, so it is kept out of pass 1: a task waking
 *    during a slow pass 1 would lose the start of its wait. One waking
 *    between the passes keeps its time and shows [Missed User Stack]. */
#define OFFCPU_START_SEEDED 0x100u /* offcpu_start.flags only */

SEC("iter/task")
int offcpu_seed_open(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task)
    return 0;
  __u32 pid = task->pid;
  __u32 tgid = task->tgid;
  if (task->on_cpu || !passes_task_filters(task, pid, tgid, true))
    return 0;
  unsigned int state = task_state(task);
  if ((state & TASK_DEAD) || !passes_state_filter(state))
    return 0;
  struct offcpu_start *old = find_start(task, pid, true);
  if (old && old->start_ns) /* switched out after attach: already open */
    return 0;

  __u64 start = window_start_ns ? window_start_ns : bpf_ktime_get_ns();
  __u64 born = task->start_time;
  if (born > start)
    start = born;
  struct offcpu_start rec = {
      .start_ns = start,
      .cgroup = key_cgroup ? task_cgroup_id(task) : 0,
      .pcount = task_pcount(task, true),
      .tgid = tgid,
      .state = state,
      .flags = OFFCPU_START_SEEDED,
  };
  if (want_user_stacks && !(task->flags & PF_KTHREAD) && task->mm)
    rec.user_stack = OFFCPU_STACK_MISSED; /* until pass 2 walks it */
  if (want_kernel_stacks && !kstack_at_switch_in)
    rec.kernel_stack =
        take_frozen_kernel_stack(task, &rec.flags, SCRATCH_ITER, NULL);
  if (!save_start(task, pid, &rec, true))
    count_loss(OFFCPU_LOST_START_STORE);
  return 0;
}

/* Rewalks left for the next pass (mm_changing); user space reads and
 * resets it after each pass. */
__u64 rewalks_deferred = 0;

/* Whether task's memory map is being changed: its mmap lock held for
 * writing or waited for (the waiters bit: readers wait behind a writer).
 * rw_semaphore's count: bit 0 writer, bit 1 waiters. */
static __always_inline bool mm_changing(struct task_struct *task) {
  struct mm_struct *mm = task->mm;
  if (!mm || !bpf_core_field_exists(mm->mmap_lock)) /* mmap_sem before 5.8 */
    return false;
  long count = BPF_CORE_READ(mm, mmap_lock.count.counter);
  return count & 3;
}

SEC("iter.s/task")
int offcpu_seed_stacks(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task)
    return 0;
  __u32 pid = task->pid;
  struct offcpu_start *rec = find_start(task, pid, true);
  if (!rec || !rec->start_ns)
    return 0;
  bool seeded = (rec->flags & OFFCPU_START_SEEDED) &&
                rec->user_stack == OFFCPU_STACK_MISSED;
  /* At stop, before the flush: stacks left for a switch-in that will not
   * come in the window (the switch hook takes them when it does). */
  bool deferred = (rec->flags & OFFCPU_USTACK_DEFERRED) && stop_ns;
  if (!seeded && !deferred && !(rec->flags & OFFCPU_USTACK_PARTIAL))
    return 0;
  /* Also run again once tables are installed: stacks walked without them
   * are taken again while their threads still sleep on them. Not before
   * its process has tables, unless its files' tables can be found from its
   * mappings (bpf_find_vma, which works here for every frame): else that
   * walk would be partial again (this pass runs at every install, and a
   * storm of new processes has many). */
  if (!seeded && !deferred && uw_tables && !uw_find_vma &&
      !uw_has_tables(task, rec->tgid))
    return 0;
  /* Reading the stack of a process whose memory map is changing would
   * sleep until the change is done (an exit, exec or fork of the process
   * holds its mmap lock for writing, and readers queue behind a writer):
   * on a busy host the holder, often at nice 0, may wait tens of ms for a
   * CPU while this pass waits on it and the stacks of every other partial
   * thread wait for this pass. Left for the next pass, soon. */
  if (!seeded && !deferred && mm_changing(task)) {
    __sync_fetch_and_add(&rewalks_deferred, 1);
    return 0;
  }
  __u64 start = rec->start_ns, pcount = task_pcount(task, true);
  __u32 flags = 0;
  __u64 stack = walk_user_stack(task, true, &flags);
  /* The task may have woken meanwhile (it ran: a new record, or a closed
   * one); then the walk may be of a moving stack and is dropped. */
  if (rec->start_ns != start || task_pcount(task, true) != pcount)
    return 0;
  announce(task, rec->tgid, stack);
  rec->user_stack = stack;
  if (deferred) {
    /* The stack first: the switch hook reads the flag, then the stack (x86
     * keeps stores in order; the barrier keeps the compiler from moving
     * them). */
    asm volatile("" ::: "memory");
    rec->flags &= ~OFFCPU_USTACK_DEFERRED;
    uw_count(uw_stats_of(SCRATCH_ITER), UW_STAT_DEFER_TAKEN);
  }
  if (!(flags & OFFCPU_USTACK_PARTIAL) &&
      (rec->flags & OFFCPU_USTACK_PARTIAL)) {
    rec->flags &= ~OFFCPU_USTACK_PARTIAL;
    uw_count(uw_stats_of(SCRATCH_ITER), UW_STAT_REWALKED);
  } else {
    rec->flags |= flags;
  }
  return 0;
}

/* Runs once at stop: charges every wait still open up to stop_ns. With
 * kernel stacks taken at switch-in it runs before the switch hook is
 * detached (see end_wait), otherwise after. */
SEC("iter/task")
int offcpu_flush(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task || !stop_ns)
    return 0;
  __u32 pid = task->pid;
  if (pid == 0)
    return 0;
  struct offcpu_start *rec = find_start(task, pid, true);
  if (!rec)
    return 0;
  /* What the task holds (see charge), which the switch hook, after the
   * window, may be releasing at the same time: whoever takes the count adds
   * the waits. */
  struct offcpu_task *ts = task_of(rec, true);
  if (hold_waits && ts)
    charge(NULL, 0, 0, 0, &ts->held);
  if (!rec->start_ns)
    return 0;
  /* Switched in unseen since the wait began, and on CPU ever since (its
   * switch-out would have ended the wait): the wait ended at its arrival.
   * This CPU's run-queue clock stands in for the task's (one clock, TSC
   * based; up to a tick stale here, unlike in the hook). */
  __u64 pc = task_pcount(task, true);
  if (pc && pc != rec->pcount)
    end_unseen_wait(task, pid, rec, bpf_ktime_get_ns(),
                    rq_clock_of(bpf_get_current_task_btf()), stop_ns, true,
                    SCRATCH_ITER, false);
  else {
    if (want_wakers && !rec->wake_ns)
      rec->waker = OFFCPU_WAKER_STILL_WAITING;
    end_wait(task, pid, rec, stop_ns, true, SCRATCH_ITER, true, false);
  }
  return 0;
}
