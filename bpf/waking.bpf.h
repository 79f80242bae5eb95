/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The sched_waking hook (--wakers, --runqueue): when and by whom a wait
 * was woken. */
#ifndef OFFCPU_WAKING_BPF_H
#define OFFCPU_WAKING_BPF_H

#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "timeline.bpf.h"
#include "wait_state.bpf.h"
/* Wakers' kernel stacks walked with ORC, as the waits'. */
#ifndef OFFCPU_WAKER_ORC
#define OFFCPU_WAKER_ORC
#endif
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
  bool timed = split_runqueue || min_block_ns > 1000 || max_block_ns != ~0ULL ||
               want_events;
  __u64 now = timed ? bpf_ktime_get_ns() : 1; /* 1: woken, time not read */
  rec->wake_ns = now;
  if (!want_wakers)
    return;
  if (timed) {
    __u64 waited = now > rec->start_ns ? now - rec->start_ns : 0;
    if (waited > max_block_ns)
      return; /* too long to be counted: no waker needed */
    /* For the timeline alone, only waits that will be events need one:
     * a waker's stacks are most of this hook's cost. */
    __u64 least = key_wakers ? min_block_ns : events_min_ns;
    if (waited < least) {
      rec->waker = OFFCPU_WAKER_TOO_SHORT;
      return;
    }
  }
  rec->waker = take_waker(ctx, current_waker_memos(trusted), trusted);
  copy_hop(task_of(rec, trusted));
}

#endif /* OFFCPU_WAKING_BPF_H */
