/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-thread state: the open wait, the waits a thread holds and its stack
 * memos; in task storage (5.11+), else a hash map by thread id. */
#ifndef OFFCPU_WAIT_STATE_BPF_H
#define OFFCPU_WAIT_STATE_BPF_H

#include "kernel_unwind.bpf.h"
#include "offcpu/shared.h"
#include "offcpu/timeline.h"
#include "settings.bpf.h"
#include "user_unwind.bpf.h"

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
  /* The timeline (timeline.bpf.h): this thread's last wait, and the last
   * wait of the thread that woke its open one. */
  struct offcpu_hop last;
  struct offcpu_hop hop;
};

/* offcpu_start.flags: the record is in starts_spill, not in task storage
 * (see spill_start). */
#define OFFCPU_START_SPILLED 0x4000u

/* The per-thread state `rec` belongs to, where it is task storage. */
static __always_inline struct offcpu_task *task_of(struct offcpu_start *rec,
                                                   bool trusted) {
  return trusted && use_task_storage && !(rec->flags & OFFCPU_START_SPILLED)
             ? (struct offcpu_task *)rec
             : NULL;
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

/* Waits whose start went to starts_spill because the kernel could not give
 * their thread task storage (spill_start); 0: none, nothing to look up. */
__u64 starts_spilled = 0;

/* Those waits by thread id; a whole offcpu_task each, so that code that
 * takes a record for its thread's storage (task_of) stays within the value
 * (task_of returns NULL for them: their memos and held waits are unused). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, __u32);
  __type(value, struct offcpu_task);
} starts_spill SEC(".maps");

/* A thread's open wait spilled to starts_spill, if one. */
static __always_inline struct offcpu_start *spilled_start(__u32 pid) {
  if (!*(volatile __u64 *)&starts_spilled)
    return NULL;
  struct offcpu_task *r = bpf_map_lookup_elem(&starts_spill, &pid);
  return r && r->start.start_ns ? &r->start : NULL;
}

/* `trusted` is a compile-time constant: true where the task pointer is a
 * BTF pointer the verifier accepts for task storage and task helpers
 * (tp_btf, iterators), false for raw_tp, where those paths are compiled out. */
static __always_inline struct offcpu_start *
find_start(struct task_struct *t, __u32 pid, bool trusted) {
  if (trusted && use_task_storage) {
    struct offcpu_task *ts = bpf_task_storage_get(&starts_task, t, 0, 0);
    if (ts && ts->start.start_ns)
      return &ts->start;
    struct offcpu_start *spilled = spilled_start(pid);
    if (spilled)
      return spilled;
    return ts ? &ts->start : NULL;
  }
  return bpf_map_lookup_elem(&starts_hash, &pid);
}

/* A wait's start kept in starts_spill by thread id when the kernel could
 * not create the thread's task storage: that create allocates from the
 * switch hook (interrupts off), where the allocator's per-CPU cache may be
 * empty for a moment (a burst of new threads), and it fails while another
 * task-storage operation on this CPU was preempted (a thread exiting, an
 * iterator). The wait is then ended from there, its storage created at a
 * later switch; it was lost before (issue #27). */
static __always_inline bool spill_start(__u32 pid,
                                        const struct offcpu_start *rec) {
  __u32 zero = 0;
  struct offcpu_task *r = bpf_map_lookup_elem(&starts_spill, &pid);
  if (!r) {
    /* Preallocated: the insert allocates nothing. Its value is copied from
     * the per-CPU scratch (too large for the BPF stack); only the start is
     * ever read. */
    struct reuse_span *from = bpf_map_lookup_elem(&reuse_span_buf, &zero);
    if (!from ||
        bpf_map_update_elem(&starts_spill, &pid, from->b, BPF_NOEXIST) ||
        !(r = bpf_map_lookup_elem(&starts_spill, &pid)))
      return false;
  }
  r->start = *rec;
  r->start.flags |= OFFCPU_START_SPILLED;
  __sync_fetch_and_add(&starts_spilled, 1);
  return true;
}

static __always_inline bool save_start(struct task_struct *t, __u32 pid,
                                       const struct offcpu_start *rec,
                                       bool trusted) {
  if (trusted && use_task_storage) {
    struct offcpu_task *ts = bpf_task_storage_get(
        &starts_task, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!ts)
      return spill_start(pid, rec);
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
  else if (rec->flags & OFFCPU_START_SPILLED)
    bpf_map_delete_elem(&starts_spill, &pid);
}

#endif /* OFFCPU_WAIT_STATE_BPF_H */
