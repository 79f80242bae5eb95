/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Who wakes a waiting task (--wakers): the task running at sched_waking,
 * with its kernel and user stacks, or the interrupt that did the wakeup.
 * Stored once per distinct waker in the wakers map. Shared by offcpu's
 * programs. A program that walks kernel stacks with ORC defines
 * OFFCPU_WAKER_ORC before including it: the waker's kernel stack is then
 * walked so too (kernel_unwind.bpf.h, whose maps the others do without). */
#ifndef OFFCPU_WAKER_BPF_H
#define OFFCPU_WAKER_BPF_H

#include "announce.bpf.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_comm.bpf.h"
#include "task_filter.bpf.h"
#include "user_unwind.bpf.h"
#ifdef OFFCPU_WAKER_ORC
#include "kernel_unwind.bpf.h"
#endif

/* Wakers (--wakers), deduplicated like stacks: id -> who and from where. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader when it is used */
  __type(key, __u64);
  __type(value, struct offcpu_waker);
} wakers SEC(".maps");

/* The last waker record a caller stored and its id (0: none): a thread
 * wakes from the same place again and again (a pipe writer, a lock
 * holder), and then its id is known without the hash and the map lookup. */
struct waker_last {
  struct offcpu_waker w;
  __u64 id;
};

/* The waker's memos, kept per thread by the caller. */
struct waker_memo_set {
  struct uw_memo_set user;
#ifdef OFFCPU_WAKER_ORC
  struct kw_memo_set kernel;
#endif
  struct waker_last last;
};

/* The kernel stack of the waking context, cut after the interrupt entry if
 * it passes through one: the frames below belong to whatever task the
 * interrupt happened to hit, not to the wakeup. */
static __always_inline __u64 waking_kernel_stack(void *ctx, __u32 *kind,
                                                 struct waker_memo_set *wm) {
#ifdef OFFCPU_WAKER_ORC
  /* The ORC walk from the tracepoint's frame, reused while the stack holds:
   * a fraction of the kernel's walk, which goes through the tracer's own
   * frames first. It serves on the task's own stack only, never in an
   * interrupt (x86-64 runs handlers on the interrupt stacks): the waker
   * is the task. */
  bool served;
  __u64 id = take_live_kernel_stack(ctx, wm ? &wm->kernel : NULL, &served);
  if (kwalk_orc)
    count_kunwind(served ? OFFCPU_KUNWIND_LIVE : OFFCPU_KUNWIND_LIVE_KERNEL);
  if (served)
    return id;
#endif
  struct offcpu_stack *s = scratch_stack(SCRATCH_HOOK);
  if (!s)
    return OFFCPU_STACK_MISSED;
  long bytes = bpf_get_stack(ctx, s->ips, stack_bytes(), 0);
  if (bytes <= 0 || !irqentry_start)
    return store_stack(s, bytes, 0);
  __u64 stored = store_stack_cut_irq(s, bytes);
  if (stack_cut_at_irq(s))
    *kind = OFFCPU_WAKER_INTERRUPT;
  return stored;
}

/* Waker record `w`'s id, the record stored once per distinct waker in the
 * wakers map; OFFCPU_WAKER_LOST if the map is full. `last`: the caller's
 * memo of the record it stored last (NULL: none). */
static __always_inline __u64 store_waker(const struct offcpu_waker *w,
                                         struct waker_last *last) {
  if (last && last->id && same_words(w, &last->w, sizeof(*w)))
    return last->id;
  __u64 comm[2];
  __builtin_memcpy(comm, w->comm, sizeof(comm));
  __u64 h = mix64(((__u64)w->pid << 32 | w->tgid) ^ 0x77616b6572ULL);
  h = mix64(h ^ w->user_stack) + 1;
  h = mix64(h ^ w->kernel_stack) + 2;
  h = mix64(h ^ comm[0] ^ ((__u64)w->kind << 56)) + 3;
  h = mix64(h ^ comm[1]);
  if (h < OFFCPU_WAKER_FIRST_ID)
    h += OFFCPU_WAKER_FIRST_ID;
  if (!bpf_map_lookup_elem(&wakers, &h)) {
    long err = bpf_map_update_elem(&wakers, &h, w, BPF_NOEXIST);
    if (err && err != -OFFCPU_EEXIST) {
      count_loss(OFFCPU_LOST_WAKER_STORE);
      return OFFCPU_WAKER_LOST;
    }
  }
  if (last) {
    last->w = *w;
    last->id = h;
  }
  return h;
}

/* The current task as a waker in `w`: its ids and comm; returns its task
 * flags. `trusted`: a BTF-typed program, which reads them by plain loads
 * through the BTF pointer, no helper call each. */
static __always_inline unsigned int current_waker(struct offcpu_waker *w,
                                                  bool trusted) {
  if (trusted) {
    struct task_struct *t = bpf_get_current_task_btf();
    w->pid = t->pid;
    w->tgid = t->tgid;
    read_comm(w->comm, t, true);
    return t->flags;
  }
  __u64 id = bpf_get_current_pid_tgid();
  w->pid = (__u32)id;
  w->tgid = id >> 32;
  bpf_get_current_comm(&w->comm, sizeof(w->comm));
  struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
  return BPF_CORE_READ(cur, flags);
}

/* The waker being recorded, per CPU and caller (`scratch` of take_waker:
 * one per program of an object that records wakers, as a program does not
 * nest in itself). Off the BPF stack, whose 512 bytes the hook shares with
 * the user walk on kernels without private stacks. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct offcpu_waker);
} waker_scratch SEC(".maps");

/* Who is waking the task now (the current task, or an interrupt), stored
 * once per distinct waker; returns its id or an OFFCPU_WAKER_* marker.
 * `wm`: the waker's stack memos (NULL: none), kept apart from those of its
 * own switch-outs: a thread wakes others from other places than it blocks
 * at. `kernel`: walk its kernel stack; false where none is shown (-U) and
 * the caller knows the current task made the wakeup (the walk is what
 * tells an interrupt apart otherwise). */
static __always_inline __u64 take_waker(void *ctx, struct waker_memo_set *wm,
                                        bool trusted, bool kernel,
                                        __u32 scratch) {
  /* Built per CPU, off the BPF stack: see waker_scratch. */
  struct offcpu_waker *wp = bpf_map_lookup_elem(&waker_scratch, &scratch);
  if (!wp)
    return OFFCPU_WAKER_UNSEEN; /* never: an array's index in range */
  struct offcpu_waker *w = wp;
  __builtin_memset(w, 0, sizeof(*w));
  w->kind = OFFCPU_WAKER_TASK;
  if (kernel)
    w->kernel_stack = waking_kernel_stack(ctx, &w->kind, wm);
  struct uw_memo_set *ms = wm ? &wm->user : NULL;
  if (w->kind == OFFCPU_WAKER_TASK) {
    unsigned int flags = current_waker(w, trusted);
    if (want_user_stacks && w->pid && !(flags & PF_KTHREAD)) {
      __u32 partial = 0; /* a waker is not walked again later */
      bool reused = false;
      w->user_stack =
          user_fp_walk
              ? walk_user_stack_hook(bpf_get_current_task_btf(), &partial, ms,
                                     &reused, false, SCRATCH_HOOK)
              : take_current_stack(ctx, BPF_F_USER_STACK);
      /* A reused stack was announced when it was walked. */
      if (!reused && !announce((struct task_struct *)bpf_get_current_task(),
                               w->tgid, w->user_stack))
        uw_memo_forget(ms);
    }
  }
  return store_waker(w, wm ? &wm->last : NULL);
}

#endif /* OFFCPU_WAKER_BPF_H */
