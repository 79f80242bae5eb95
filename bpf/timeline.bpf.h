/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The timeline of long waits: every wait at least events_min_ns long is
 * also sent to user space as an event (include/offcpu/timeline.h) through
 * the `events` ring buffer, with its thread, times, stacks and waker; the
 * aggregation map still counts it as before. Wake chains: each thread's
 * task storage keeps its last wait (`last`), and a wakeup copies the
 * waker's into the woken wait (`hop`), so that an event says what its
 * waker had itself just waited for. Ring buffer: 5.8+; task storage:
 * 5.11+ (older kernels get events without hops). Everything here is
 * behind the want_events setting: without it the verifier drops it. */
#ifndef OFFCPU_TIMELINE_BPF_H
#define OFFCPU_TIMELINE_BPF_H

#include "offcpu/shared.h"
#include "offcpu/timeline.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "wait_state.bpf.h"

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096); /* resized by the loader (--events-memory) */
} events SEC(".maps");

/* The current task wakes the task whose storage is `woken`: its own last
 * wait becomes the woken wait's hop. In an interrupt the current task is
 * whoever it hit; user space drops the hop there (the waker is no task). */
static __always_inline void copy_hop(struct offcpu_task *woken) {
  if (!want_events || !woken)
    return;
  struct offcpu_task *w =
      bpf_task_storage_get(&starts_task, bpf_get_current_task_btf(), 0, 0);
  if (w && w->last.end_ns)
    woken->hop = w->last;
  else
    woken->hop.end_ns = 0;
}

/* Who ended a wait that ends now: its waker, or why there is none. */
static __always_inline __u64 waker_of(const struct offcpu_start *rec) {
  if (rec->waker || !want_wakers)
    return rec->waker;
  return rec->state == 0 ? OFFCPU_WAKER_PREEMPTED : OFFCPU_WAKER_UNSEEN;
}

/* A wait of `delta` ns that passed -m/-M has ended, its key complete:
 * sent as an event if it is long enough (a full ring loses it, counted
 * with its time), and kept as the thread's last unless it was a
 * preemption (`ts`: its storage, NULL without task storage). Before the charge,
 * so that nothing of this lives across that call (the flush iterator's stack is
 * near its limit). */
static __always_inline void timeline_wait_ended(const struct offcpu_key *key,
                                                struct offcpu_start *rec,
                                                struct offcpu_task *ts,
                                                __u64 start, __u64 delta,
                                                __u64 runq) {
  if (!want_events)
    return;
  /* A preemption is no wakeup: nobody ended it, and what the thread last
   * waited for is still the wait before it (a sleep its timer ended, then
   * a preemption before it could answer: the sleep is the hop). */
  if (ts && rec->state != 0) {
    ts->last.start_ns = start;
    ts->last.end_ns = start + delta;
    ts->last.waker = waker_of(rec);
    ts->last.user_stack = key->user_stack;
    ts->last.kernel_stack = key->kernel_stack;
    ts->last.pid = key->pid;
    ts->last.state = rec->state;
  }
  if (delta < events_min_ns)
    return;
  struct offcpu_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    __sync_fetch_and_add(&lost[OFFCPU_LOST_EVENT_RING], 1);
    __sync_fetch_and_add(&lost_ns[OFFCPU_LOST_EVENT_RING], delta);
    return;
  }
  e->start_ns = start;
  e->duration_ns = delta;
  e->runq_ns = runq;
  e->user_stack = key->user_stack;
  e->kernel_stack = key->kernel_stack;
  e->waker = waker_of(rec);
  e->tgid = key->tgid;
  e->pid = key->pid;
  e->state = rec->state;
  e->flags = key->flags & OFFCPU_KSTACK_NOSCHED;
  __builtin_memcpy(e->comm, key->comm, sizeof(e->comm));
  if (ts && ts->hop.end_ns) {
    e->hop = ts->hop;
    ts->hop.end_ns = 0; /* this wait's, not the next one's */
  } else {
    __builtin_memset(&e->hop, 0, sizeof(e->hop));
  }
  /* No wakeup: user space reads the ring after every poll (50 ms at most
   * apart); a wakeup per event would cost more than the event. */
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

#endif /* OFFCPU_TIMELINE_BPF_H */
