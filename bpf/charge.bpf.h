/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Charging a wait to its key in the aggregation map, or holding it in the
 * thread's storage until its key makes way; the overflow map takes what
 * finds the aggregation map full. */
#ifndef OFFCPU_CHARGE_BPF_H
#define OFFCPU_CHARGE_BPF_H

#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "wait_state.bpf.h"

/* Waits added to `counts` so far (the progress line) and their time by
 * state class; per CPU, so the hot path shares no cache line between CPUs. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct offcpu_charged);
} waits_charged SEC(".maps");

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
  __type(value, struct offcpu_totals);
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
  struct offcpu_totals empty = {};
  struct offcpu_totals *o = lookup_or_insert(&counts_overflow, &ok, &empty, -1);
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

/* Keys inserted so far (bumped on an insert only). */
__u64 counts_keys = 0;

/* What a key enters the map with: a global, not the BPF stack, whose 512
 * bytes a call chain shares on kernels without private stacks (before
 * 6.13, and some builds since): the histogram made it 160 bytes. */
struct offcpu_value counts_zero = {};

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
  long err = bpf_map_update_elem(&counts, key, &counts_zero, BPF_NOEXIST);
  if (!err)
    __sync_fetch_and_add(&counts_keys, 1);
  else if (err != -OFFCPU_EEXIST) /* EEXIST: inserted by another CPU */
    return NULL;
  return bpf_map_lookup_elem(&counts, key);
}

/* Adds one wait of `ns` (`runq` of it runnable) to `key` in the
 * aggregation map: its totals, its max and its histogram bucket, all in
 * the value the lookup found. The max is a plain store: a key is one
 * thread's, whose waits end one at a time. */
static __always_inline void add_to_counts(const struct offcpu_key *key,
                                          __u64 ns, __u64 runq) {
  struct offcpu_value *val = counts_entry(key);
  if (!val) {
    add_to_overflow(key, ns, 1, runq);
    return;
  }
  __sync_fetch_and_add(&val->total_ns, ns);
  __sync_fetch_and_add(&val->count, 1);
  if (split_runqueue && runq)
    __sync_fetch_and_add(&val->runq_ns, runq);
  if (ns > val->max_ns)
    val->max_ns = ns;
  __sync_fetch_and_add(&val->hist[offcpu_hist_slot(ns)], 1);
}

/* Adds the `n` waits `add` sums up (a thread's held waits) to `key`. */
static __always_inline void merge_to_counts(const struct offcpu_key *key,
                                            const struct offcpu_value *add,
                                            __u64 n) {
  struct offcpu_value *val = counts_entry(key);
  if (!val) {
    add_to_overflow(key, add->total_ns, n, add->runq_ns);
    return;
  }
  __sync_fetch_and_add(&val->total_ns, add->total_ns);
  __sync_fetch_and_add(&val->count, n);
  if (split_runqueue && add->runq_ns)
    __sync_fetch_and_add(&val->runq_ns, add->runq_ns);
  if (add->max_ns > val->max_ns)
    val->max_ns = add->max_ns;
  /* Through the shared leaf callback: as a bounded loop, its 32 steps were
   * checked on each of the three ways here, in every program that charges
   * (2,400 instructions each). A merge is a key making way, not a switch. */
  struct hist_add c = {
      .kind = KLOOP_HIST_ADD, .to = val->hist, .from = add->hist};
  if (use_bpf_loop) {
    bpf_loop(OFFCPU_HIST_BUCKETS, kloop_leaf_step, &c, 0);
  } else { /* before 5.17 */
    for (__u32 i = 0; i < OFFCPU_HIST_BUCKETS; i++)
      hist_add_step(i, &c);
  }
}

/* Adds the waits `held` holds to the aggregation map, if it holds any. The
 * switch hook and the flush iterator may both try after stop: the one
 * that takes the count adds them. */
static __always_inline void release_held(struct offcpu_held *held,
                                         struct offcpu_charged *c) {
  __u64 n = held->val.count;
  if (!n || __sync_val_compare_and_swap(&held->val.count, n, 0) != n)
    return;
  merge_to_counts(&held->key, &held->val, n);
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
        h->val.max_ns = 0;
        __builtin_memset(h->val.hist, 0, sizeof(h->val.hist));
        /* count last: 0 said "empty" while the key was written */
      }
      held->last = way;
    }
    h->val.total_ns += delta;
    h->val.runq_ns += runq;
    if (delta > h->val.max_ns)
      h->val.max_ns = delta;
    h->val.hist[offcpu_hist_slot(delta)] += 1;
    h->val.count += 1;
  } else {
    add_to_counts(key, delta, runq);
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

#endif /* OFFCPU_CHARGE_BPF_H */
