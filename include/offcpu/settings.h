/* Every setting the loader writes into the BPF programs' .rodata before
 * load, one line each: X(type, name, default). The verifier treats them as
 * constants and drops the branches they disable.
 *
 * One list for every program (offcpu, rwsem, ...): bpf/settings.bpf.h
 * defines each as a `const volatile` global, user space fills a plain
 * struct offcpu_settings with the same fields and copies it into either
 * skeleton's .rodata (src/collect/bpf_settings.h). A program ignores the
 * settings it does not read. A new setting: a line here, and its value in
 * the session that sets it. */
#ifndef OFFCPU_SETTINGS_H
#define OFFCPU_SETTINGS_H

#include "offcpu/shared.h"

/* clang-format off */
#define OFFCPU_SETTINGS(X)                                                     \
  /* ---- Which tasks (task_filter.bpf.h) ---- */                              \
  X(bool, filter_tgid, false)     /* -p, --children: filter_tgids */           \
  /* -p of one process, none to join later: its tgid (0: not so), which    \
   * hooks run for every task of the machine compare before any lookup. */ \
  X(__u32, only_tgid, 0)                                                       \
  /* offcpu's own process (lock --futex): never a futex's holder. A       \
   * timer's interrupt that wakes a timed-out waiter may find one of its   \
   * threads inside a futex call of its own. */                            \
  X(__u32, self_tgid, 0)                                                       \
  X(bool, filter_tid, false)      /* -t: filter_tids */                        \
  X(bool, user_threads_only, false)                                            \
  X(bool, kernel_threads_only, false)                                          \
  /* -n NAME: target_name, exact; the process name (its main thread's       \
   * comm), or the thread's own with match_thread_name. */                    \
  X(bool, filter_name, false)                                                  \
  X(bool, match_thread_name, false)                                            \
  /* --cgroup: only tasks in these cgroups (v2) or below (filter_cgroups). */ \
  X(bool, filter_cgroup, false)                                                \
  /* --children, -- COMMAND: processes forked by traced ones are traced     \
   * too (the fork hook adds them to filter_tgids; they leave it at their   \
   * last switch-out). */                                                     \
  X(bool, follow_children, false)                                              \
  /* -m/-M: waits outside these bounds are not charged. */                   \
  X(__u64, min_block_ns, 1000)                                                 \
  X(__u64, max_block_ns, ~0ULL)                                                \
  /* --state: < 0 no state filter; BCC's bitmask otherwise. */               \
  X(__s64, state_filter, -1)                                                   \
  /* --state by name: a set of offcpu_state_class bits (0: not used). */     \
  X(__u32, state_classes, 0)                                                   \
  /* offcpu lock, rwsem: the kinds traced (bits of offcpu_lock_kind);      \
   * waits shorter than min_wait_ns or longer than max_block_ns dropped. */  \
  X(__u32, lock_kinds, 1u << OFFCPU_LOCK_RWSEM_WRITE)                          \
  X(__u64, min_wait_ns, 0)                                                     \
  /* offcpu lock: the slab cache of each lock (bpf_get_kmem_cache, 6.12+). */ \
  X(bool, lock_slab_caches, false)                                             \
                                                                               \
  /* ---- What a wait's key holds ---- */                                     \
  X(bool, want_user_stacks, true)                                              \
  X(bool, want_kernel_stacks, true)                                            \
  /* --show-state: the state class is part of the key (an annotation        \
   * frame); --per-cgroup: the cgroup is. */                                  \
  X(bool, show_state, false)                                                   \
  X(bool, key_cgroup, false)                                                   \
  /* --wakers: who woke each wait; --runqueue: when, to split the wait into \
   * blocked and runnable time. --wakers needs the sched_waking hook,       \
   * attached only then; --runqueue reads when the task was queued from the \
   * scheduler's own accounting at switch-in (runq_from_sched_info), and    \
   * uses the hook only on kernels without it. */                             \
  X(bool, want_wakers, false)                                                  \
  /* Wakers' kernel stacks from the kernel's walk are cut after their first \
   * interrupt entry frame, in store_stack_in: off where no program of the  \
   * object takes them (the split load's switch share), as the search costs \
   * every program that stores stacks its verification. */                 \
  X(bool, cut_irq_stacks, false)                                               \
  X(bool, split_runqueue, false)                                               \
  X(bool, runq_from_sched_info, false)                                         \
  /* The waker in the key (--wakers); want_wakers alone takes it for the    \
   * timeline's events only. */                                               \
  X(bool, key_wakers, false)                                                   \
  /* The timeline (timeline.bpf.h): waits of events_min_ns or more sent as  \
   * events; wakers taken only for waits that long, unless key_wakers. */    \
  X(bool, want_events, false)                                                  \
  X(__u64, events_min_ns, 1000000)                                             \
                                                                               \
  /* ---- What the kernel offers (the attach plan) ---- */                    \
  /* 5.18+ passes prev_state to sched_switch; older kernels read the task. */\
  X(bool, has_prev_state_arg, true)                                            \
  /* Task storage (5.11+) has no size limit and frees itself on exit;       \
   * older kernels use the starts_hash map, which can fill up. */             \
  X(bool, use_task_storage, true)                                              \
  /* Waits held in the thread's task storage at its last two keys (see      \
   * charge): with task storage and the flush iterator that adds what       \
   * threads hold at stop. */                                                 \
  X(bool, hold_waits, false)                                                   \
  /* The kernel stack of a task being switched in is still frozen where it  \
   * blocked: with the ORC walker (kernel_unwind.bpf.h) it is taken then,   \
   * only for waits that passed -m/-M. Otherwise at switch-out. */            \
  X(bool, kstack_at_switch_in, false)                                          \
  /* Walk user frame pointers ourselves rather than through bpf_get_stack   \
   * (needs bpf_get_current_task_btf 5.11 and bpf_task_pt_regs 5.15). */      \
  X(bool, user_fp_walk, true)                                                  \
  /* bpf_loop (5.17+): the verifier checks a loop body once instead of once \
   * per iteration, which cuts program load time several times over. Older  \
   * kernels run the same steps as bounded loops. */                          \
  X(bool, use_bpf_loop, true)                                                  \
  /* New (process, user stack) pairs announced (ring buffer, 5.8+). */       \
  X(bool, announce_processes, true)                                            \
  /* The split load's first object (collect/split_loader.h): it only        \
   * creates the maps, so its programs return at once and are verified in  \
   * no time; libbpf's objects verify the real ones against those maps.   */\
  X(bool, maps_only, false)                                                    \
  /* The window edges' programs (seed_stacks, flush) return at once: their \
   * real copies load after the attach (collect/edge_loader.h), and the    \
   * seeded waits' user stacks are left for their switch-in until then.  */\
  X(bool, edges_later, false)                                                  \
                                                                               \
  /* ---- Stack and key storage (stack_store.bpf.h, charge.bpf.h) ---- */     \
  /* Frames to keep (<= OFFCPU_MAX_STACK_DEPTH); --perf-max-stack-depth. */  \
  X(__u32, stack_depth, OFFCPU_MAX_STACK_DEPTH)                                \
  /* Stacks and keys of `counts` the window may fill (0: all the map        \
   * holds). The rest is kept for the passes at its edges: the one that     \
   * opens the waits in progress at start (their user stacks) and the stop  \
   * pass (the threads still blocked): on a busy host the hooks would       \
   * otherwise fill the maps with short waits first, and the longest waits  \
   * of the run, of threads blocked all along, would be lost. */              \
  X(__u32, window_stack_limit, 0)                                              \
  X(__u32, window_deep_stack_limit, 0) /* of deep_stacks */                    \
  X(__u32, window_counts_limit, 0)                                             \
  /* Stack reuse: on by default; --no-stack-reuse turns it off (to measure  \
   * what it saves), --verify-stack-reuse walks anyway and counts           \
   * disagreements. */                                                        \
  X(bool, reuse_stacks, true)                                                  \
  X(bool, reuse_verify, false)                                                 \
  /* --time-walks: each user stack reused or walked from a thread's memos   \
   * is counted and timed (two clock reads) by why it was walked            \
   * (UW_STAT_CAUSE*); off, the verifier prunes the counting. */              \
  X(bool, uw_time_walks, false)                                                \
                                                                               \
  /* ---- User stacks (user_unwind.bpf.h) ---- */                             \
  /* Tables in use (--user-unwind auto with bpf_loop and tp_btf); else      \
   * every user stack is walked with frame pointers. */                       \
  X(bool, uw_tables, false)                                                    \
  /* bpf_find_vma is there (5.17+): processes not installed yet are walked  \
   * through their files' tables. */                                          \
  X(bool, uw_find_vma, false)                                                  \
  /* Where the kernel maps all of RAM, and its page tables' depth (found by \
   * bpf/direct_map.bpf.c; 0: unknown). With plain loads                    \
   * (OFFCPU_DIRECT_LOADS) the memo check reads the current task's stack    \
   * words there, through its page tables, rather than by a probe read: a   \
   * user copy costs ~200 ns on virtual machines that trap the user-access  \
   * instructions (STAC/CLAC). */                                             \
  X(__u64, uw_direct_base, 0)                                                  \
  X(__u32, uw_pt_levels, 0)                                                    \
  /* And with them, a thread's user stack is checked at its switch-in, only \
   * for waits that pass -m/-M (uw_can_defer). */                             \
  X(bool, uw_defer, false)                                                     \
  /* Python frames (python.bpf.h) for the processes py_procs names. */      \
  X(bool, python_frames, true)                                                 \
                                                                               \
  /* ---- Kernel stacks (kernel_unwind.bpf.h, waker.bpf.h) ---- */            \
  /* The ORC walker is used; where the kernel's text and tables are. */      \
  X(bool, kwalk_orc, false)                                                    \
  X(struct offcpu_kernel_text, ktext, {})                                      \
  /* Test knob: hand over to the kernel's walk after this many frames. */    \
  X(__u32, kwalk_limit, OFFCPU_MAX_STACK_DEPTH)                                \
  /* --verify-kernel-unwind: also take the kernel's walk and compare. */     \
  X(bool, kwalk_verify, false)                                                 \
  /* __irqentry_text_start/end, where the kernel knows them (0: not): a     \
   * wakeup whose stack passes through interrupt entry code was made by the \
   * interrupt, not by the task it happened to hit. */                        \
  X(__u64, irqentry_start, 0)                                                  \
  X(__u64, irqentry_end, 0)
/* clang-format on */

/* The one setting that is an array: -n NAME's name, zero-padded. */
#define OFFCPU_TARGET_NAME_LEN OFFCPU_COMM_LEN

#ifdef __cplusplus
/* The settings as user space fills them (see src/collect/bpf_settings.h). */
struct offcpu_settings {
#define OFFCPU_SETTING_FIELD(type, name, init) type name;
  OFFCPU_SETTINGS(OFFCPU_SETTING_FIELD)
#undef OFFCPU_SETTING_FIELD
  char target_name[OFFCPU_TARGET_NAME_LEN];
};
#endif

#endif /* OFFCPU_SETTINGS_H */
