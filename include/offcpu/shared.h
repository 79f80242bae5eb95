/* Structs and constants that cross the BPF/user-space boundary.
 * Included by the bpf/ programs (after vmlinux.h) and by the C++ loader; this
 * is the only definition of each layout. Plain fixed-width types only. */
#ifndef OFFCPU_SHARED_H
#define OFFCPU_SHARED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define OFFCPU_COMM_LEN 16
/* Deepest stack we store. perf's default sysctl kernel.perf_event_max_stack
 * is 127, and BCC's --perf-max-stack-depth defaults to it too. */
#define OFFCPU_MAX_STACK_DEPTH 127

/* Stack ids are 64-bit content hashes of the frames, never 0 or 1. */
#define OFFCPU_NO_STACK 0ULL     /* none taken: kernel thread, or not asked */
#define OFFCPU_STACK_MISSED 1ULL /* asked, but the walk or its store failed */

/* Why an event was lost; indexes the `lost` counters in BPF .bss. */
enum offcpu_loss {
  OFFCPU_LOST_STACK_MAP_FULL = 0, /* stacks map reached max_entries */
  OFFCPU_LOST_STACK_COLLISION,    /* two different stacks, same hash */
  OFFCPU_LOST_AGG_MAP_FULL,       /* aggregation map reached max_entries */
  OFFCPU_LOST_START_STORE,        /* could not record when a task blocked */
  OFFCPU_LOST_USER_STACK_WALK,    /* user stack walk failed or empty */
  OFFCPU_LOST_KERNEL_STACK_WALK,  /* kernel stack walk failed or empty */
  OFFCPU_LOST_NR,
};

/* offcpu_key.flags */
/* The kernel stack came from bpf_get_task_stack(), which leaves out the
 * scheduler's own (__sched) frames: schedule, do_nanosleep, mutex_lock... */
#define OFFCPU_KSTACK_NOSCHED 1u

/* Where a task's current off-CPU wait began (task storage or hash map). */
struct offcpu_start {
  __u64 start_ns;
  __u64 user_stack;   /* id in the stacks map, taken at switch-out */
  __u64 kernel_stack; /* only when kernel stacks are taken at switch-out */
  __u32 tgid;
  __u32 state; /* task state when it went off CPU */
  __u32 flags; /* OFFCPU_KSTACK_* */
  __u32 pad;
};

/* Announced through a ring buffer the first time a process blocks on a
 * user stack: user space reads its maps while the stack is current. */
struct offcpu_new_stack {
  __u32 tgid;
  __u32 pad;
  __u64 user_stack;
};

/* Aggregation key: one per (process, thread, name, stacks). */
struct offcpu_key {
  __u32 tgid;
  __u32 pid;
  __u64 user_stack;
  __u64 kernel_stack;
  __u32 flags; /* OFFCPU_KSTACK_* */
  __u32 pad;
  char comm[OFFCPU_COMM_LEN];
};

struct offcpu_value {
  __u64 total_ns;
  __u64 count;
};

/* A stored stack: frames leaf first, as the kernel returns them. */
struct offcpu_stack {
  __u32 nr;
  __u32 pad;
  __u64 ips[OFFCPU_MAX_STACK_DEPTH];
};

/* ---- offcpu rwsem ---- */

/* rwsem_key.flags */
#define RWSEM_WAIT_WRITE 1u
#define RWSEM_WAIT_READ 2u
#define RWSEM_LOCK_IS_MMAP 4u /* the waiting task's own mm->mmap_lock */

/* A wait in progress, keyed by thread id. */
struct rwsem_start {
  __u64 start_ns;
  __u64 lock;
  __u64 user_stack;
  __u64 kernel_stack;
  __u32 tgid;
  __u32 flags;
  char comm[OFFCPU_COMM_LEN];
};

struct rwsem_key {
  __u32 tgid;
  __u32 pid;
  __u64 user_stack;
  __u64 kernel_stack;
  __u64 lock;
  __u32 flags;
  __u32 pad;
  char comm[OFFCPU_COMM_LEN];
};

struct rwsem_value {
  __u64 total_ns;
  __u64 count;
  __u64 max_ns;
};

#endif /* OFFCPU_SHARED_H */
