/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Who wakes a waiting task (--wakers): the task running at sched_waking,
 * with its kernel and user stacks, or the interrupt that did the wakeup.
 * Stored once per distinct waker in the wakers map. Shared by offcpu's
 * programs; include after stack_store.bpf.h, announce.bpf.h and
 * user_unwind.bpf.h. */
#ifndef OFFCPU_WAKER_BPF_H
#define OFFCPU_WAKER_BPF_H

#ifndef PF_KTHREAD
#define PF_KTHREAD 0x00200000
#endif

/* __irqentry_text_start/end, where the kernel knows them (0: not): a
 * wakeup whose stack passes through interrupt entry code was made by the
 * interrupt, not by the task it happened to hit. */
const volatile __u64 irqentry_start = 0;
const volatile __u64 irqentry_end = 0;

/* Wakers (--wakers), deduplicated like stacks: id -> who and from where. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader when it is used */
  __type(key, __u64);
  __type(value, struct offcpu_waker);
} wakers SEC(".maps");

/* The kernel stack of the waking context, cut after the interrupt entry if
 * it passes through one: the frames below belong to whatever task the
 * interrupt happened to hit, not to the wakeup. */
static __always_inline __u64 waking_kernel_stack(void *ctx, __u32 *kind) {
  struct offcpu_stack *s = scratch_stack(SCRATCH_HOOK);
  if (!s)
    return OFFCPU_STACK_MISSED;
  long bytes = bpf_get_stack(ctx, s->ips, stack_bytes(), 0);
  if (bytes <= 0 || !irqentry_start)
    return store_stack(s, bytes, false);
  __u32 n = bytes / sizeof(__u64);
  for (__u32 i = 0; i < 48; i++) {
    __u64 idx = i;
    same_register(idx);
    if (idx >= n || idx >= OFFCPU_MAX_STACK_DEPTH)
      break;
    __u64 ip = s->ips[idx];
    if (ip >= irqentry_start && ip < irqentry_end) {
      *kind = OFFCPU_WAKER_INTERRUPT;
      bytes = (long)(idx + 1) * sizeof(__u64);
      break;
    }
  }
  return store_stack(s, bytes, false);
}

/* Who is waking the task now (the current task, or an interrupt), stored
 * once per distinct waker; returns its id or an OFFCPU_WAKER_* marker. */
static __always_inline __u64 take_waker(void *ctx) {
  struct offcpu_waker w = {};
  w.kind = OFFCPU_WAKER_TASK;
  w.kernel_stack = waking_kernel_stack(ctx, &w.kind);
  if (w.kind == OFFCPU_WAKER_TASK) {
    __u64 id = bpf_get_current_pid_tgid();
    w.pid = (__u32)id;
    w.tgid = id >> 32;
    bpf_get_current_comm(&w.comm, sizeof(w.comm));
    struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
    if (want_user_stacks && w.pid &&
        !(BPF_CORE_READ(cur, flags) & PF_KTHREAD)) {
      __u32 partial = 0; /* a waker is not walked again later */
      w.user_stack = user_fp_walk ? walk_user_stack(bpf_get_current_task_btf(),
                                                    false, &partial)
                                  : take_current_stack(ctx, BPF_F_USER_STACK);
      announce(cur, w.tgid, w.user_stack);
    }
  }
  __u64 comm[2];
  __builtin_memcpy(comm, w.comm, sizeof(comm));
  __u64 h = mix64(((__u64)w.pid << 32 | w.tgid) ^ 0x77616b6572ULL);
  h = mix64(h ^ w.user_stack) + 1;
  h = mix64(h ^ w.kernel_stack) + 2;
  h = mix64(h ^ comm[0] ^ ((__u64)w.kind << 56)) + 3;
  h = mix64(h ^ comm[1]);
  if (h < OFFCPU_WAKER_FIRST_ID)
    h += OFFCPU_WAKER_FIRST_ID;
  if (bpf_map_lookup_elem(&wakers, &h))
    return h;
  long err = bpf_map_update_elem(&wakers, &h, &w, BPF_NOEXIST);
  if (err && err != -OFFCPU_EEXIST) {
    count_loss(OFFCPU_LOST_WAKER_STORE);
    return OFFCPU_WAKER_LOST;
  }
  return h;
}

#endif /* OFFCPU_WAKER_BPF_H */
