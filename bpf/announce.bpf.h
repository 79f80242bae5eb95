/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* New (process, user stack) pairs, announced to user space through a ring
 * buffer: it reads the process's memory maps and opens its files while the
 * process is blocked on that stack, so that a process that exits before
 * tracing ends keeps its user frames named. Shared by offcpu's programs.
 * Ring buffer: 5.8+. */
#ifndef OFFCPU_ANNOUNCE_BPF_H
#define OFFCPU_ANNOUNCE_BPF_H

#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024); /* ~10,000 announcements in flight */
} new_processes SEC(".maps");

/* (process, user stack) pairs already announced; one forgotten is announced
 * again, which costs a maps read. The value is unused (the key is what
 * matters); parent tgids are looked up at announcement. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct offcpu_new_stack);
  __type(value, __u8);
} seen_stacks SEC(".maps");

/* What each process was last announced with: its image (self_exec_id)
 * and how many mappings it had. A stack of a new image, or one taken after
 * the process mapped or unmapped something (a library loaded), wakes user
 * space at once, to read the maps while the process lives. The rest (a
 * server's known workers blocking at new places: 1,400 a second under
 * pgbench, each a wakeup of offcpu and two context switches) wait for its
 * next poll (50 ms at most), or wake it when the ring fills. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u64); /* exec_id << 32 | map_count */
} announced_images SEC(".maps");

/* Unread announcements past which a batch wakes user space anyway: a
 * quarter of the ring. */
#define ANNOUNCE_WAKE_BYTES (64 * 1024)

/* The ring's wakeup flag for an announcement of `key->tgid`, `t` one of its
 * threads. The switch program's stack is at the 512-byte limit of kernels
 * without private stacks: the map's value is written over the key's
 * user_stack, which is no longer needed, rather than into a slot of its
 * own. */
static __always_inline __u64 announce_wakeup(struct task_struct *t,
                                             struct offcpu_new_stack *key) {
  __u64 now = (__u64)BPF_CORE_READ(t, self_exec_id) << 32 |
              (__u32)BPF_CORE_READ(t, mm, map_count);
  __u64 *last = bpf_map_lookup_elem(&announced_images, &key->tgid);
  if (!last || *last != now) {
    key->user_stack = now;
    bpf_map_update_elem(&announced_images, &key->tgid, &key->user_stack,
                        BPF_ANY);
    /* Forced: the ring's own rule wakes only a reader that has read
     * everything before, which the batched ones make rare. */
    return BPF_RB_FORCE_WAKEUP;
  }
  if (bpf_ringbuf_query(&new_processes, BPF_RB_AVAIL_DATA) >=
      ANNOUNCE_WAKE_BYTES)
    return BPF_RB_FORCE_WAKEUP;
  return BPF_RB_NO_WAKEUP;
}

/* A process forked and not exec'd since has its parent's image: exec
 * bumps self_exec_id, which fork copied from the parent along with
 * parent_exec_id. */
static __always_inline __u32 same_image_parent(struct task_struct *t) {
  /* Probe reads: some callers' task pointers are not trusted (raw_tp). */
  if (BPF_CORE_READ(t, self_exec_id) != BPF_CORE_READ(t, parent_exec_id))
    return 0;
  return BPF_CORE_READ(t, real_parent, tgid);
}

/* Once per process and user stack, so a process that execs or maps a
 * library later is read again with the mappings that stack was taken under.
 * When the ring is full the pair is forgotten again (and counted), so the
 * next wait on that stack announces it. */
static __always_inline bool announce(struct task_struct *t, __u32 tgid,
                                     __u64 user_stack) {
  if (!announce_processes || !stack_stored(user_stack))
    return true;
  struct offcpu_new_stack key = {.tgid = tgid, .user_stack = user_stack};
  if (bpf_map_lookup_elem(&seen_stacks, &key))
    return true;
  __u8 one = 1;
  if (bpf_map_update_elem(&seen_stacks, &key, &one, BPF_NOEXIST))
    return true; /* another CPU announced it */
  struct offcpu_new_stack *slot =
      bpf_ringbuf_reserve(&new_processes, sizeof(*slot), 0);
  if (!slot) {
    bpf_map_delete_elem(&seen_stacks, &key);
    count_loss(OFFCPU_LOST_ANNOUNCE);
    return false;
  }
  *slot = key;
  slot->parent = same_image_parent(t);
  bpf_ringbuf_submit(slot, announce_wakeup(t, &key));
  return true;
}

#endif /* OFFCPU_ANNOUNCE_BPF_H */
