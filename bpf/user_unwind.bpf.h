/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* User stacks walked with unwind tables built from each file's CFI, so
 * that code built without frame pointers (Debian's glibc and binaries)
 * shows whole stacks. Layout, lookup path and fallbacks: include/offcpu/
 * unwind.h. Include after stack_store.bpf.h and announce.bpf.h. */
#ifndef OFFCPU_USER_UNWIND_BPF_H
#define OFFCPU_USER_UNWIND_BPF_H

#include "announce.bpf.h"
#include "direct_load.bpf.h"
#include "offcpu/shared.h"
#include "offcpu/unwind.h"
#include "python.bpf.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"

/* offcpu_start.flags: the user stack was walked without tables (not
 * installed yet): the rewalk iterator takes it again while it is blocked. */
#define OFFCPU_USTACK_PARTIAL 0x200u
/* offcpu_start.flags: the user stack is taken at switch-in (uw_can_defer),
 * from the memo of way 1 (else 0) if it still holds. */
#define OFFCPU_USTACK_DEFERRED 0x400u
#define OFFCPU_USTACK_DEFERRED_WAY1 0x1000u
#define OFFCPU_USTACK_DEFERRED_WAY2 0x10000u /* way bit 1 (with four) */
/* Deferred without looking for the memo at switch-out: the switch-in's
 * walk looks (uw_walk_hook). */
#define OFFCPU_USTACK_DEFERRED_ANY 0x2000u
/* Out of uw_walk_hook only: the stack was a memo's, announced before. */
#define OFFCPU_USTACK_REUSED 0x800u
/* Into a walk only (cleared by it): the wait began with a preemption, for
 * the walk's counts by cause (UW_STAT_CAUSE_PREEMPTED). */
#define OFFCPU_USTACK_PREEMPTED 0x8000u

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, struct uw_proc);
} uw_procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, __u32);
  __type(value, struct uw_file);
} uw_files SEC(".maps");

/* Files with tables by identity (struct uw_file_id). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
  __uint(max_entries, 16384);
  __type(key, struct uw_file_key);
  __type(value, struct uw_file_id);
} uw_file_ids SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, __u32);
  __type(value, __u64);
} uw_pages SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, __u32);
  __type(value, struct uw_chunk);
} uw_rows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, __u32);
  __type(value, struct uw_rule);
} uw_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 * 1024);
} uw_requests SEC(".maps");

/* What each process was last asked about, and the walks made without its
 * tables since (struct uw_demand). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, struct uw_demand);
} uw_asked SEC(".maps");

/* Where a looked-up address is. */
#define UW_AT_TABLE 0    /* a file with a table: `rule` applies */
#define UW_AT_NO_TABLE 1 /* executable, no table: frame pointers */
#define UW_AT_OUTSIDE 2  /* in no executable mapping */
#define UW_AT_DEFERRED 3 /* a file whose table is not built yet */

/* (installed layout, address) -> rule, direct-mapped, per CPU and per
 * context. The layout is uw_proc.gen: user space gives processes with the
 * same installed mappings one gen (children forked without exec, a
 * pre-fork server's workers), so they share their cached rules. */
struct uw_cache_slot {
  __u64 pc;
  __u32 unused;
  __u32 gen;
  struct uw_rule rule;
  __u32 where;
  __u32 pad;
};

#define UW_CACHE_SLOTS 4096
#define UW_CHUNK_SLOTS (PERCPU_CHUNK_BYTES / sizeof(struct uw_cache_slot))
struct uw_cache_chunk {
  struct uw_cache_slot s[UW_CHUNK_SLOTS];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2 * UW_CACHE_SLOTS / UW_CHUNK_SLOTS);
  __type(key, __u32);
  __type(value, struct uw_cache_chunk);
} uw_cache SEC(".maps");

/* Always 0; the verifier cannot know (see kwalk_unknown_zero). */
__u32 uw_unknown_zero = 0;

/* Bumped by user space after every install of a process's tables: a memo
 * walked at the same epoch used the tables a walk now would use, so a hit
 * needs no lookup of the process. */
__u32 uw_epoch = 0;

/* uw_frame.vma: the mapping resolved for a walk through bpf_find_vma. */
#define UW_VMA_NONE 0    /* not resolved, or the kernel said busy */
#define UW_VMA_TABLE 1   /* an executable mapping of a file with a table */
#define UW_VMA_NOTABLE 2 /* an executable mapping without one */
#define UW_VMA_OUTSIDE 3 /* no executable mapping there: the walk stops */

struct uw_query {
  __u64 pc; /* address to look up (a return address minus one) */
  __u64 vma_start, vma_end, vma_base; /* a walk through bpf_find_vma */
  __u32 vma_file, vma_state;
  __u32 owner;
  __u32 gen;
  __u32 cache;
  __u32 where; /* result: UW_AT_* */
  struct uw_rule rule;
  __u32 missed; /* result: the cache did not have it */
  /* The key of the lookup's map lookups: in the query (per CPU), not one
   * more slot of the BPF stack each. */
  __u32 key;
};

/* A binary search by bpf_loop: of a process's mappings for the one holding
 * pc (p set), or of a page's rows for the last at or below off (p NULL).
 * One callback for both: each counts against the light loader's 32
 * functions (see bpf_objects_test), and p, a map value or NULL on the
 * caller's stack, leaves the verifier one way through it. */
struct uw_search {
  struct uw_proc *p; /* the mappings' process; NULL: a page's rows */
  __u64 pc;          /* mappings: the address */
  __u32 first;       /* rows: the page's first row */
  __u32 off;         /* rows: the offset in the page */
  __u32 lo, hi;      /* [lo, hi) still candidates */
  __s64 found;       /* the mapping's index, or the row; -1: none */
};

static __always_inline long uw_msearch_step(struct uw_search *c) {
  if (c->lo >= c->hi)
    return 1;
  __u64 mid = c->lo + (c->hi - c->lo) / 2;
  same_register(mid);
  if (mid >= UW_MAX_MAPPINGS)
    return 1;
  if (c->p->maps[mid].start <= c->pc) {
    c->found = mid;
    c->lo = mid + 1;
  } else {
    c->hi = mid;
  }
  return 0;
}

static __always_inline long uw_rsearch_step(struct uw_search *c) {
  if (c->lo >= c->hi)
    return 1;
  __u32 mid = c->lo + (c->hi - c->lo) / 2;
  __u32 idx = c->first + mid;
  __u32 chunk = idx / UW_ROWS_PER_CHUNK;
  struct uw_chunk *ch = bpf_map_lookup_elem(&uw_rows, &chunk);
  if (!ch) {
    c->found = -1;
    return 1;
  }
  __u64 slot = idx % UW_ROWS_PER_CHUNK;
  same_register(slot);
  if (slot >= UW_ROWS_PER_CHUNK)
    return 1;
  __u32 row = ch->rows[slot];
  if ((row >> UW_ROW_OFFSET_SHIFT) <= c->off) {
    c->found = row;
    c->lo = mid + 1;
  } else {
    c->hi = mid;
  }
  return 0;
}

static long uw_search_step(__u32 i, void *data) {
  struct uw_search *c = data;
  return c->p ? uw_msearch_step(c) : uw_rsearch_step(c);
}

/* The rule for q->pc in file fidx's table, placed at `base` in the
 * process: q->where becomes UW_AT_TABLE where the file has one, q->rule the
 * row's rule (none: NONE, frame pointers). */
static __always_inline void uw_rule_in(struct uw_query *q, __u32 fidx,
                                       __u64 base, struct uw_search *rs) {
  q->key = fidx;
  struct uw_file *f = bpf_map_lookup_elem(&uw_files, &q->key);
  if (!f)
    return;
  __u64 rel = q->pc - base;
  __u64 page = rel >> UW_PAGE_SHIFT;
  q->where = UW_AT_TABLE; /* rule NONE unless a row says otherwise */
  __u32 pidx = 0;
  bool in_run = false;
#pragma unroll
  for (int i = 0; i < UW_FILE_RUNS; i++) {
    struct uw_page_run *r = &f->runs[i];
    if (page >= r->first_page && page - r->first_page < r->n_pages) {
      pidx = r->page_base + (__u32)(page - r->first_page);
      in_run = true;
      break;
    }
  }
  if (!in_run)
    return; /* between the runs: no row covers it */
  q->key = pidx;
  __u64 *pg = bpf_map_lookup_elem(&uw_pages, &q->key);
  if (!pg)
    return;
  rs->p = NULL;
  rs->pc = 0;
  rs->first = (__u32)*pg;
  rs->lo = uw_unknown_zero;
  rs->hi = (__u32)(*pg >> 32);
  rs->off = rel & (UW_PAGE_SIZE - 1);
  rs->found = -1;
  bpf_loop(14, uw_search_step, rs, 0);
  if (rs->found < 0)
    return;
  __u32 rule_id = (__u32)rs->found & UW_ROW_RULE_MASK;
  q->key = rule_id;
  struct uw_rule *r = bpf_map_lookup_elem(&uw_rules, &q->key);
  if (r)
    q->rule = *r;
}

/* bpf_find_vma's answer for an address: its executable mapping and file,
 * then (uw_vma_table) whether that file has a table and where the table
 * sits in the process. */
struct uw_vma_find {
  __u64 start, end; /* the mapping */
  __u64 pgoff;
  struct uw_file_key key;
  __u64 base;
  __u32 file;
  __u8 found;     /* in an executable mapping */
  __u8 has_file;  /* of a file */
  __u8 has_table; /* of a file with a table */
  __u8 pad;
};

#define UW_VM_EXEC 0x4 /* VM_EXEC */

/* Copies only: the verifier checks a callback once per place it is called
 * from, the rest is in the global function below (checked once). */
static long uw_vma_found(struct task_struct *task, struct vm_area_struct *vma,
                         void *data) {
  struct uw_vma_find *v = data;
  if (!(vma->vm_flags & UW_VM_EXEC))
    return 0;
  v->found = 1;
  v->start = vma->vm_start;
  v->end = vma->vm_end;
  v->pgoff = vma->vm_pgoff;
  struct file *file = vma->vm_file;
  if (!file)
    return 0;
  struct inode *inode = file->f_inode;
  v->key.dev = inode->i_sb->s_dev;
  v->key.ino = inode->i_ino;
  v->has_file = 1;
  return 0;
}

__noinline int uw_vma_table(struct uw_vma_find *v) {
  if (!v || !v->found || !v->has_file)
    return 0;
  struct uw_file_key k = v->key;
  struct uw_file_id *id = bpf_map_lookup_elem(&uw_file_ids, &k);
  if (!id)
    return 0;
  __u64 off = v->pgoff << 12; /* PAGE_SHIFT: x86-64 */
  for (__u32 i = 0; i < UW_FILE_SEGS; i++) {
    if (i >= id->nsegs)
      break;
    struct uw_file_seg *s = &id->seg[i];
    if (off >= s->lo && off < s->hi) {
      /* The table's addresses are the file's virtual ones, placed at
       * table_base: the mapping's start holds virtual address off + delta. */
      v->base = v->start - (off + s->delta) + id->table_base;
      v->file = id->file;
      v->has_table = 1;
      return 0;
    }
  }
  return 0;
}

/* The rule for q->pc in process q->owner's installed mappings, or, for a
 * walk through bpf_find_vma (q->gen), in the mapping resolved in q. */
static __always_inline int uw_lookup(struct uw_query *q,
                                     struct uw_search *srch) {
  if (q->gen & UW_GEN_BY_VMA) {
    /* Resolved by the caller, not cached: a walk of a process that is
     * not installed yet. */
    q->missed = 1;
    __builtin_memset(&q->rule, 0, sizeof(q->rule));
    q->where = UW_AT_NO_TABLE;
    /* A frame pointer that led out of code ([heap], a data file): junk,
     * not a frame. */
    if (q->vma_state == UW_VMA_OUTSIDE) {
      q->where = UW_AT_OUTSIDE;
      return 0;
    }
    if (q->vma_state != UW_VMA_TABLE || q->pc < q->vma_start ||
        q->pc >= q->vma_end)
      return 0;
    uw_rule_in(q, q->vma_file, q->vma_base, srch);
    return 0;
  }
  __u32 idx = (mix64(q->pc ^ ((__u64)q->gen << 40)) & (UW_CACHE_SLOTS - 1)) +
              (q->cache ? UW_CACHE_SLOTS : 0);
  __u32 chunk = idx / UW_CHUNK_SLOTS;
  q->key = chunk;
  struct uw_cache_chunk *ch = bpf_map_lookup_elem(&uw_cache, &q->key);
  if (!ch)
    return 0;
  struct uw_cache_slot *c = &ch->s[idx & (UW_CHUNK_SLOTS - 1)];
  if (c->pc == q->pc && c->gen == q->gen) {
    q->where = c->where;
    q->rule = c->rule;
    return 0;
  }
  q->missed = 1;
  __builtin_memset(&q->rule, 0, sizeof(q->rule));
  q->where = UW_AT_OUTSIDE;

  __u32 owner = q->owner;
  q->key = owner;
  struct uw_proc *p = bpf_map_lookup_elem(&uw_procs, &q->key);
  if (!p)
    return 0;
  srch->p = p;
  srch->pc = q->pc;
  srch->first = 0;
  srch->off = 0;
  srch->lo = uw_unknown_zero;
  srch->hi = p->nr < UW_MAX_MAPPINGS ? p->nr : UW_MAX_MAPPINGS;
  srch->found = -1;
  bpf_loop(10, uw_search_step, srch, 0);
  __s64 m = srch->found;
  if (m < 0 || m >= UW_MAX_MAPPINGS)
    goto out;
  struct uw_mapping *map = &p->maps[m];
  if (q->pc >= map->end)
    goto out;
  q->where = UW_AT_NO_TABLE;
  if (map->file == UW_FILE_DEFERRED)
    q->where = UW_AT_DEFERRED;
  else
    uw_rule_in(q, map->file, map->base, srch);
out:
  /* Installed again since the walk began: the rule found is the new
   * content's, used but not cached under the walk's gen, which names the
   * old content for every process that shares it (read here, not kept
   * from before the searches: a register more across them is a stack
   * slot more of the 512 bytes). */
  if (p->gen == q->gen) {
    c->pc = q->pc;
    c->gen = q->gen;
    c->where = q->where;
    c->rule = q->rule;
  }
  return 0;
}

/* How far a walk has got in filling its memo. */
struct uw_noting {
  __u64 sp; /* sp at the start: words are noted relative to it */
  __u32 nr, span;
  __u32 bad; /* a word the memo cannot hold: do not keep it */
  __u32 pad;
};

/* What a walk starts from: the task's user registers at its system call
 * and the state of its address space that its memo keys on. */
struct uw_start {
  __u64 pc, sp, bp;
  __u64 mm, map_count;
  __u64 pgd; /* mm's top-level page table, read with plain loads (0: not) */
  __u32 epoch;
};

/* The frame being unwound: scalars only, so that the global functions
 * below (verified once each) can work on it; the stack reads and the store
 * of each frame happen in the loop body, which needs the task and buffer
 * pointers. */
struct uw_frame {
  __u64 pc, sp, bp;
  __u64 store_pc; /* what to store for this frame */
  __u64 rd_deref; /* 0, or a word to read first (CFA_DEREF) */
  __u64 rd_pair;  /* 16 bytes to read: [0] rbp or unused, [1] return addr */
  __u64 rd_extra; /* 0, or the saved rbp's address when not in the pair */
  __u64 val_deref, pair[2], extra;
  __u64 ask_pc; /* result: an address in a file left UW_FILE_DEFERRED */
  struct uw_rule rule;
  union {
    /* A walk through bpf_find_vma (the rewalk iterator's: gen has
     * UW_GEN_BY_VMA): the mapping last resolved. */
    struct {
      __u64 vma_start, vma_end, vma_base;
    };
    /* A walk with plain loads (a hook's or the flush's): the task's
     * top-level page table (0: reads by probe read), the last page
     * translated and its direct-map address (0 if it could not be). */
    struct {
      __u64 pt_page, pgd, pt_base;
    };
  };
  __u32 vma_file, vma_state;
  __u32 n, max;
  __u32 owner; /* uw_procs entry used; 0: none, frame pointers only */
  __u32 gen;
  __u32 cache;  /* SCRATCH_HOOK or SCRATCH_ITER */
  __u8 exact;   /* pc is not a return address (first frame, after signal) */
  __u8 stale;   /* the process's map_count moved since its install */
  __u8 partial; /* result: walked without (current) tables */
  __u8 fault;   /* a read failed */
  /* Where bp came from (UW_BPSRC_*), for the memo: see uw_bp_used. */
  __u8 bp_src;
  __u8 bp_regs_used;   /* result: the walk used the register's rbp */
  __u64 bp_at, bp_val; /* UW_BPSRC_READ: where the walk read bp, and what */
  /* Counted here, added to uw_stats once per walk: a shared per-CPU
   * counter read and written per frame would cost more than the frame. */
  __u16 by_table, by_fp, misses;
  __u16 end; /* enum uw_stat: how the walk ended; 0 while going */
  /* Kept here rather than on the BPF stack, whose 512 bytes are shared by
   * a whole call chain (hook, walk, frame lookup) on kernels without
   * private stacks (before 6.13, and builds whose JIT has none). Not
   * cleared by uw_frame_reset: */
  struct uw_query q;       /* uw_frame_begin's lookup of the frame's rule */
  struct uw_noting note;   /* the memo's words noted so far */
  struct uw_start start;   /* what the walk started from */
  struct uw_demand demand; /* uw_request's new entry */
  /* walk_user_stack_memo's scalars, kept here rather than spilled to the
   * BPF stack across its calls. */
  __u64 t0, memo_stack, py_sig;
  __u32 way, cause, tgid;
  bool preempted, parent, by_vma;
};

/* uw_frame.bp_src */
#define UW_BPSRC_REGS 0    /* the register's value at the system call */
#define UW_BPSRC_READ 1    /* read from the stack at bp_at, not used since */
#define UW_BPSRC_SETTLED 2 /* noted in the memo, or a constant */

#define UW_GO 0
#define UW_STOP 1       /* nothing more to store */
#define UW_STORE_STOP 2 /* store this frame, then stop */

static __always_inline void uw_reads_for_cfa(struct uw_frame *f, __u64 cfa) {
  f->rd_pair = cfa - 16;
  f->rd_extra = 0;
  if ((f->rule.flags & UW_BP_SAVED) && f->rule.bp_off != -16)
    f->rd_extra = cfa + f->rule.bp_off;
}

/* A file whose table is built once a walk reaches it: the frame is known
 * (its address is in the file's code), its callers are not yet. Asked
 * for; the walk is partial, taken again once the table is installed. */
static __always_inline bool uw_deferred_stop(struct uw_frame *f,
                                             const struct uw_query *q) {
  if (q->where != UW_AT_DEFERRED)
    return false;
  f->partial = 1;
  f->ask_pc = q->pc;
  f->end = UW_STAT_DEFERRED_FILE;
  return true;
}

/* Finds the frame's rule and says what to read. Global: verified once. */
__noinline int uw_frame_begin(struct uw_frame *f) {
  if (!f)
    return UW_STOP;
  /* A return address of 0 is in no mapping: said so, so that the walk is
   * not taken for one that reached the end of the stack. */
  if (!f->pc) {
    f->end = UW_STAT_OUTSIDE;
    return UW_STOP;
  }
  /* A caller is left past the limit: the stack is cut (the walk's loop
   * runs one step more than the limit to see this). */
  if (f->n >= f->max || f->n >= OFFCPU_MAX_STACK_DEPTH) {
    f->end = UW_STAT_TRUNCATED;
    return UW_STOP;
  }
  struct uw_query *q = &f->q;
  __builtin_memset(q, 0, sizeof(*q));
  q->pc = f->exact ? f->pc : f->pc - 1;
  q->vma_start = f->vma_start;
  q->vma_end = f->vma_end;
  q->vma_base = f->vma_base;
  q->vma_file = f->vma_file;
  q->vma_state = f->vma_state;
  q->owner = f->owner;
  q->gen = f->gen;
  q->cache = f->cache;
  q->where = UW_AT_NO_TABLE;
  if (f->owner) {
    /* One search context on the stack (bpf_loop's must be) for both of
     * the lookup's searches: each its own would be 40 bytes more of the
     * 512 a call chain shares. */
    struct uw_search srch;
    uw_lookup(q, &srch);
    f->misses += q->missed;
  }
  /* Through bpf_find_vma, a file without a table (none built yet): frame
   * pointers for now, walked again once the process is installed. */
  if (q->where == UW_AT_NO_TABLE && (f->gen & UW_GEN_BY_VMA))
    f->partial = 1;
  if (q->where == UW_AT_OUTSIDE) {
    if (f->stale) {
      f->partial = 1;
      f->end = UW_STAT_STALE;
    } else {
      f->end = UW_STAT_OUTSIDE;
    }
    return UW_STOP;
  }
  /* Frames but the first are looked up one byte back when named: an exact
   * address after a signal frame is stored one byte on. */
  f->store_pc = f->exact && f->n > 0 ? f->pc + 1 : f->pc;
  /* The sigreturn trampoline is entered by a return to its first byte
   * (its CFI starts a byte early for that): named by that byte. */
  if (q->where == UW_AT_TABLE && q->rule.kind == UW_RULE_SIGNAL && !f->exact)
    f->store_pc = f->pc + 1;
  if (q->where != UW_AT_TABLE)
    __builtin_memset(&q->rule, 0, sizeof(q->rule)); /* frame pointers */
  f->rule = q->rule;
  if (uw_deferred_stop(f, q))
    return UW_STORE_STOP;
  f->fault = 0;
  f->rd_deref = 0;
  f->rd_extra = 0;
  switch (q->rule.kind) {
  case UW_RULE_END:
    f->end = UW_STAT_END_OF_STACK;
    return UW_STORE_STOP;
  case UW_RULE_NONE:
    if (!f->bp) {
      f->end = UW_STAT_END_FP;
      return UW_STORE_STOP;
    }
    f->rd_pair = f->bp; /* saved rbp, then the return address */
    return UW_GO;
  case UW_RULE_SIGNAL:
    /* rsp points into the ucontext the kernel pushed: the interrupted rsp,
     * then rip, at cfa_off; rbp at bp_off. */
    f->rd_pair = f->sp + q->rule.cfa_off;
    f->rd_extra = f->sp + q->rule.bp_off;
    return UW_GO;
  case UW_RULE_PLT:
    /* The stub pushes once before its second jump (byte 11 of 16). */
    uw_reads_for_cfa(f, f->sp + 8 + ((f->pc & 15) >= 11 ? 8 : 0));
    return UW_GO;
  case UW_RULE_CFA:
  case UW_RULE_CFA_DEREF: {
    __u64 cfa = ((q->rule.flags & UW_CFA_FROM_BP) ? f->bp : f->sp) +
                (__s64)q->rule.cfa_off;
    if (q->rule.kind == UW_RULE_CFA_DEREF)
      f->rd_deref = cfa;
    else
      uw_reads_for_cfa(f, cfa);
    return UW_GO;
  }
  default:
    f->end = UW_STAT_UNSUPPORTED;
    return UW_STORE_STOP;
  }
}

/* After the CFA itself was read (CFA_DEREF). */
__noinline int uw_frame_mid(struct uw_frame *f) {
  if (!f)
    return UW_STOP;
  if (f->fault) {
    f->end = UW_STAT_READ_FAULT;
    return UW_STOP;
  }
  uw_reads_for_cfa(f, f->val_deref);
  return UW_GO;
}

/* Moves *f to the caller, from what was read. */
__noinline int uw_frame_end(struct uw_frame *f) {
  if (!f)
    return UW_STOP;
  if (f->fault) {
    f->end = UW_STAT_READ_FAULT;
    return UW_STOP;
  }
  __u64 sp, bp = f->bp;
  bool exact = false;
  switch (f->rule.kind) {
  case UW_RULE_NONE:
    sp = f->rd_pair + 16;
    bp = f->pair[0];
    f->by_fp++;
    break;
  case UW_RULE_SIGNAL:
    sp = f->pair[0];
    bp = f->extra;
    exact = true; /* the interrupted instruction, not a return address */
    f->by_table++;
    break;
  default:
    sp = f->rd_pair + 16; /* the CFA */
    if (f->rule.flags & UW_BP_SAVED)
      bp = f->rule.bp_off == -16 ? f->pair[0] : f->extra;
    if (f->rule.flags & UW_BP_UNDEFINED)
      bp = 0;
    f->by_table++;
    break;
  }
  /* Callers are above: a frame that does not move up is bad data, except
   * out of a signal frame (an alternate signal stack may be anywhere). */
  if (sp <= f->sp && !f->exact && f->rule.kind != UW_RULE_SIGNAL) {
    f->end = UW_STAT_BAD_FRAME;
    return UW_STOP;
  }
  f->pc = f->pair[1];
  f->sp = sp;
  f->bp = bp;
  f->exact = exact;
  return UW_GO;
}

/* ---- Reusing a thread's last user stack ----
 * A thread that blocks in a loop (an event loop in epoll_wait, a worker on
 * a condition variable, a pipe reader) blocks at the same place again and
 * again. A walk is a function of the registers at the system call, the
 * address space and its tables, and the stack words it reads: when the
 * registers, the mm, its map_count and the tables' epoch are those of
 * the thread's last walk and every word that walk used still holds the same
 * value, the walk would store the same stack, so its id is reused. The
 * words are checked against one copy of the stack from sp up to the highest
 * of them: one read of usually a few hundred bytes instead of a walk.
 * Stacks whose words lie further up, or with more words than a memo holds,
 * are walked every time. */
#define UW_MEMO_WORDS 32
#define UW_MEMO_SPAN REUSE_SPAN /* bytes above sp a memo's words may lie in */
/* Four per thread: a thread often leaves the CPU at two places in turn
 * (blocked in read, preempted in the write that woke its peer), and a
 * postgres backend at four or more (its socket, a lock, a WAL write and
 * flush): with two, a third of its user stacks were walked (issue #27). A
 * power of two. */
#define UW_MEMO_WAYS 4
/* A memo is walked again after UW_MEMO_RECHECK reuses (offcpu/unwind.h),
 * twice as many after each walk again that agreed with it, up to
 * UW_MEMO_RECHECK << UW_MEMO_RECHECK_DOUBLINGS: a thread blocking at one
 * place for a whole run is still walked now and then, and a walk each
 * 64 waits was a tenth of a futex wait's cost (offcpu lock --futex). */
#define UW_MEMO_RECHECK_DOUBLINGS 4

struct uw_memo {
  __u64 ip, sp, bp;
  __u64 mm;
  __u64 pgd; /* mm's top-level page table (0: not read so) */
  __u64 map_count;
  __u64 stack; /* the id the walk stored */
  __u32 epoch; /* uw_epoch when walked: no process's tables changed since */
  __u8 any_bp; /* the walk did not use the register's rbp: bp not checked */
  /* Walked for a wait that began with a preemption: see
   * uw_memo_victim_preempted. */
  __u8 preempted;
  __u16 uses;   /* reuses since it was walked (see UW_MEMO_RECHECK) */
  __u32 nr;     /* words; 0: nothing to reuse */
  __u16 span;   /* bytes from sp that hold them (at most UW_MEMO_SPAN) */
  __u16 agreed; /* walks again in a row that agreed (up to the doublings) */
  /* The signature of the Python chain stored after the native frames
   * (python.bpf.h); 0: the process was not a Python one. */
  __u64 py_sig;
  __u16 off[UW_MEMO_WORDS];
  __u64 val[UW_MEMO_WORDS];
};

/* Kept by the caller with its other per-thread state (one task storage
 * lookup per switch for all of it). */
struct uw_memo_set {
  /* The ways, and one more that a walk not kept as a memo notes into
   * (uw_memo_victim_preempted): never looked up. */
  struct uw_memo way[UW_MEMO_WAYS + 1];
  __u32 last;      /* the way used last: never the one replaced */
  __u32 next;      /* the way to replace next (uw_memo_victim) */
  __u64 py_tstate; /* the thread's PyThreadState, found before (0: none) */
};

struct uw_walk {
  struct offcpu_stack *s;
  struct task_struct *task;
  struct uw_memo *m; /* NULL: not recording (its notes: f->note) */
  /* Per CPU (uw_frames), not on the BPF stack: the switch hook may walk
   * twice in a run (the task switched in, then the one switched out). */
  struct uw_frame *f;
  /* Another task's stack, from the switch hook or the flush, read through
   * its page tables: no probe read can reach it. */
  __u32 frozen;
  __u32 preempted; /* the wait began with a preemption */
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct uw_frame);
} uw_frames SEC(".maps");

/* Notes a word the walk used in memo m, for checking it next time. A
 * global function: the count of words noted stays out of the walk's loop
 * state, which the verifier then checks far fewer times. */
__noinline int uw_note_word(struct uw_memo *m, struct uw_noting *n, __u64 addr,
                            __u64 val) {
  if (!m || !n || n->bad)
    return 0;
  __u64 off = addr - n->sp; /* wraps above the span when below sp */
  __u64 i = n->nr;
  same_register(i);
  if (off > UW_MEMO_SPAN - sizeof(__u64) || i >= UW_MEMO_WORDS) {
    n->bad = 1;
    return 0;
  }
  m->off[i] = off;
  m->val[i] = val;
  n->nr = i + 1;
  if (off + sizeof(__u64) > n->span)
    n->span = off + sizeof(__u64);
  return 0;
}

static __always_inline void uw_note(struct uw_walk *w, __u64 addr, __u64 val) {
  if (w->m)
    uw_note_word(w->m, &w->f->note, addr, val);
}

/* What uw_read_direct reads: f->rd_deref into val_deref, rd_pair into
 * pair, rd_extra into extra. */
#define UW_READ_DEREF 0
#define UW_READ_PAIR 1
#define UW_READ_EXTRA 2

#ifdef OFFCPU_DIRECT_LOADS

/* One of a frame's reads (`which`) from the stack of the walked task,
 * through its page tables (see pt_lookup): 0, or -1 where it cannot be read
 * so. A global function: the verifier checks it once, not at each of the
 * frame's three reads. */
__noinline int uw_read_direct(struct uw_frame *f, __u32 which) {
  if (!f)
    return -1;
  __u64 addr = which == UW_READ_DEREF  ? f->rd_deref
               : which == UW_READ_PAIR ? f->rd_pair
                                       : f->rd_extra;
  __u32 words = which == UW_READ_PAIR ? 2 : 1;
  __u64 got[2] = {};
  for (__u32 j = 0; j < 2; j++) {
    if (j >= words)
      break;
    __u64 a = addr + j * sizeof(__u64), page = a & ~4095ull, in = a & 4095;
    if (in > 4096 - sizeof(__u64))
      return -1; /* across two pages: never seen (sp is aligned) */
    if (page != f->pt_page) {
      f->pt_page = page;
      f->pt_base = pt_lookup(uw_direct_base, uw_pt_levels, f->pgd, page, true);
    }
    if (!f->pt_base)
      return -1;
    got[j] = kernel_word(f->pt_base + in);
  }
  if (which == UW_READ_DEREF)
    f->val_deref = got[0];
  else if (which == UW_READ_PAIR) {
    f->pair[0] = got[0];
    f->pair[1] = got[1];
  } else
    f->extra = got[0];
  return 0;
}
#endif

static __always_inline long uw_read(struct uw_walk *w, void *dst, __u32 size,
                                    __u64 addr, bool other_task, __u32 which) {
#ifdef OFFCPU_DIRECT_LOADS
  if (!other_task && w->f->pgd) {
    if (!uw_read_direct(w->f, which))
      return 0;
    if (w->frozen)
      return -1;
  }
#endif
  return other_task
             ? bpf_copy_from_user_task(dst, size, (void *)addr, w->task, 0)
             : bpf_probe_read_user(dst, size, (void *)addr);
}

/* A walk through bpf_find_vma: the mapping of the frame's address, unless
 * the last one resolved holds it. The rewalk iterator's only: in the switch
 * hook (interrupts off) the kernel defers the lock's release to a per-CPU
 * irq_work, so a second mapping in one run is refused (busy), and the
 * verifier would check the switch hook's walk far longer. There a process
 * not installed yet is walked partially and requested, and the iterator,
 * run at once, finishes the walk. */
static __always_inline void uw_resolve_vma(struct uw_walk *w) {
  struct uw_frame *f = w->f;
  if (!(f->gen & UW_GEN_BY_VMA))
    return;
  __u64 pc = f->exact ? f->pc : f->pc - 1;
  if (f->vma_state != UW_VMA_NONE && pc >= f->vma_start && pc < f->vma_end)
    return;
  struct uw_vma_find v = {};
  __u32 state = UW_VMA_NONE;
  long err = bpf_find_vma(w->task, pc, uw_vma_found, &v, 0);
  if (!err && v.found) {
    uw_vma_table(&v);
    state = v.has_table ? UW_VMA_TABLE : UW_VMA_NOTABLE;
  } else if (!err || err == -2 /* ENOENT: no mapping at all */) {
    state = UW_VMA_OUTSIDE; /* not on -EBUSY: the lock was taken */
  }
  f->vma_start = v.start;
  f->vma_end = v.end;
  f->vma_base = v.base;
  f->vma_file = v.file;
  /* Unknown to the verifier (see uw_unknown_zero): a state per constant
   * would have it check the walk's loop body once more for each. */
  f->vma_state = state + uw_unknown_zero;
}

/* The frame's addresses come from bp (a frame-pointer frame, or a CFA
 * based on rbp): the walk depends on the value bp holds, and a memo must
 * check it. Only then: code built without frame pointers keeps any value
 * in rbp, saves it in its frames and restores it, and a memo that checked
 * every saved rbp (and the register itself) missed whenever one changed,
 * although the walk would have stored the same stack. */
static __always_inline void uw_bp_used(struct uw_walk *w) {
  struct uw_frame *f = w->f;
  if (f->bp_src == UW_BPSRC_REGS)
    f->bp_regs_used = 1;
  else if (f->bp_src == UW_BPSRC_READ)
    uw_note(w, f->bp_at, f->bp_val);
  f->bp_src = UW_BPSRC_SETTLED;
}

/* The frame restores the caller's rbp from the stack at `at`. */
static __always_inline void uw_bp_read(struct uw_frame *f, __u64 at,
                                       __u64 val) {
  f->bp_src = UW_BPSRC_READ;
  f->bp_at = at;
  f->bp_val = val;
}

/* One frame: decide, store, read, move on. */
static __always_inline long uw_step(struct uw_walk *w, bool other_task) {
  struct uw_frame *f = w->f;
  if (uw_find_vma && other_task)
    uw_resolve_vma(w);
  int r = uw_frame_begin(f);
  if (r == UW_STOP)
    return 1;
  /* (A frame-pointer frame with bp 0 ends the walk: a use too.) */
  if (f->rule.kind == UW_RULE_NONE ||
      ((f->rule.kind == UW_RULE_CFA || f->rule.kind == UW_RULE_CFA_DEREF) &&
       (f->rule.flags & UW_CFA_FROM_BP)))
    uw_bp_used(w);
  __u64 n = f->n;
  same_register(n);
  if (n >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  w->s->ips[n] = f->store_pc;
  f->n = n + 1;
  if (r != UW_GO)
    return 1;
  if (f->rd_deref) {
    if (uw_read(w, &f->val_deref, sizeof(f->val_deref), f->rd_deref, other_task,
                UW_READ_DEREF))
      f->fault = 1;
    else
      uw_note(w, f->rd_deref, f->val_deref);
    if (uw_frame_mid(f) != UW_GO)
      return 1;
  }
  if (uw_read(w, f->pair, sizeof(f->pair), f->rd_pair, other_task,
              UW_READ_PAIR)) {
    f->fault = 1;
  } else {
    /* The word below the return address is used only as the saved rbp
     * (noted if a frame uses it, see uw_bp_used), or out of a signal frame
     * as the interrupted rsp: a local variable there must not make the
     * memo miss. */
    if (f->rule.kind == UW_RULE_SIGNAL)
      uw_note(w, f->rd_pair, f->pair[0]);
    else if (f->rule.kind == UW_RULE_NONE ||
             ((f->rule.flags & UW_BP_SAVED) && f->rule.bp_off == -16))
      uw_bp_read(f, f->rd_pair, f->pair[0]);
    uw_note(w, f->rd_pair + sizeof(__u64), f->pair[1]);
  }
  /* Only ever the saved rbp (uw_reads_for_cfa, and the signal frame's). */
  if (f->rd_extra) {
    if (uw_read(w, &f->extra, sizeof(f->extra), f->rd_extra, other_task,
                UW_READ_EXTRA))
      f->fault = 1;
    else
      uw_bp_read(f, f->rd_extra, f->extra);
  }
  if (f->rule.kind != UW_RULE_NONE && f->rule.kind != UW_RULE_SIGNAL &&
      (f->rule.flags & UW_BP_UNDEFINED))
    f->bp_src = UW_BPSRC_SETTLED; /* the caller's bp is 0 */
  return uw_frame_end(f) != UW_GO;
}

static long uw_step_current(__u32 i, void *data) {
  return uw_step(data, false);
}

static long uw_step_other(__u32 i, void *data) {
  return uw_step(data, true);
}

/* A process's mappings as the walker keys them (uw_proc.map_count, its
 * memos and requests): mm->map_count, with the start of the stack, which
 * each exec places anew, above it. An exec of the same program maps as
 * many VMAs at other addresses: by map_count alone it passed for the image
 * installed before, and every walk ended outside its mappings. User space
 * computes the same from /proc/PID/stat (src/unwind/unwinder.cpp). */
static __always_inline __u64 uw_map_key(struct mm_struct *mm) {
  return mm->map_count ^ (mm->start_stack << 16);
}

/* Asks user space for the process's tables, once per map_count; later
 * walks without them are counted as its demand. */
static __always_inline void uw_request(__u32 tgid, __u64 map_count,
                                       struct uw_stats *st,
                                       struct uw_frame *f) {
  struct uw_demand *asked = bpf_map_lookup_elem(&uw_asked, &tgid);
  if (asked && asked->map_count == map_count) {
    asked->walks++;
    return;
  }
  f->demand.map_count = map_count; /* per CPU: off the BPF stack */
  f->demand.walks = 1;
  if (bpf_map_update_elem(&uw_asked, &tgid, &f->demand, BPF_ANY))
    return;
  struct uw_request *r = bpf_ringbuf_reserve(&uw_requests, sizeof(*r), 0);
  if (!r) {
    bpf_map_delete_elem(&uw_asked, &tgid);
    uw_count(st, UW_STAT_REQUESTS_LOST);
    return;
  }
  r->tgid = tgid;
  r->pad = 0;
  r->pc = f->ask_pc;
  bpf_ringbuf_submit(r, 0);
  uw_count(st, UW_STAT_REQUESTS);
}

/* Whether the walker has tables for task t's process (its own, or its
 * parent's for a child forked without exec). */
static __always_inline bool uw_has_tables(struct task_struct *t, __u32 tgid) {
  if (bpf_map_lookup_elem(&uw_procs, &tgid))
    return true;
  __u32 parent = same_image_parent(t);
  return parent && bpf_map_lookup_elem(&uw_procs, &parent);
}

/* The memo's words compared with the stack at `buf` (the bytes from m->sp
 * up, or NULL) or, with plain loads, where they are in the direct map
 * (pages[i]: the direct-map address of page i from m->sp's page). */
struct uw_memo_view {
  const struct reuse_span *buf;
  __u64 pages[3]; /* a memo spans at most 8 KiB: three pages */
};

#ifdef OFFCPU_DIRECT_LOADS
/* The direct-map addresses of the pages the memo's span covers in the
 * address space at `pgd`; false if one cannot be read so (not present, not
 * ordinary memory, or the direct map unknown). */
static __always_inline bool uw_memo_pages(const struct uw_memo *m, __u64 pgd,
                                          __u32 span, struct uw_memo_view *v) {
  __u64 base = uw_direct_base;
  if (!base || !pgd)
    return false;
  __u64 first = m->sp & ~4095ull, last = (m->sp + span - 1) & ~4095ull;
  for (__u32 i = 0; i < 3; i++) {
    __u64 page = first + i * 4096ull;
    if (page > last)
      break;
    v->pages[i] = pt_lookup(base, uw_pt_levels, pgd, page, true);
    if (!v->pages[i])
      return false;
  }
  return true;
}
#endif

/* Every word of the memo still holds its value in the stack of the current
 * task or, `frozen`, of a task off CPU since (its address space's top-level
 * page table at `pgd`). A global function: verified once. */
__noinline int uw_memo_holds(const struct uw_memo *m, __u64 pgd, __u32 frozen) {
#ifndef OFFCPU_DIRECT_LOADS
  /* Unused in this object: said used, or the compiler may leave the
   * argument's register unset at a call, which the verifier refuses (a
   * global function takes scalars) and the plan falls back. */
  asm volatile("" ::"r"(pgd));
#endif
  if (!m)
    return 0;
  __u32 span = m->span, zero = 0;
  if (span == 0 || span > UW_MEMO_SPAN)
    return 0;
  struct uw_memo_view v = {};
#ifdef OFFCPU_DIRECT_LOADS
  if (!uw_memo_pages(m, pgd, span, &v))
#endif
  {
    if (frozen)
      return 0; /* another task's stack: a probe read would read ours */
    struct reuse_span *buf = bpf_map_lookup_elem(&reuse_span_buf, &zero);
    if (!buf || bpf_probe_read_user(buf->b, span, (void *)m->sp))
      return 0;
    v.buf = buf;
    uw_count(uw_stats_of(SCRATCH_HOOK), UW_STAT_REUSE_PROBE_READ);
  }
  /* A plain bounded loop: a bpf_loop callback per word would cost more
   * than the word (an indirect call and return thunks on current CPUs). */
  __u32 nr = m->nr;
  for (__u32 i = 0; i < UW_MEMO_WORDS; i++) {
    if (i >= nr)
      return 1;
    __u64 off = m->off[i];
    same_register(off);
    if (off > UW_MEMO_SPAN - sizeof(__u64))
      return 0;
    __u64 now;
#ifdef OFFCPU_DIRECT_LOADS
    if (!v.buf) {
      __u64 at = (m->sp & 4095) + off; /* from the first page's start */
      __u64 page = at >> 12, in = at & 4095;
      if (page > 2 || in > 4096 - sizeof(__u64))
        return 0; /* a word across two pages: never seen (sp is aligned) */
      now = kernel_word(v.pages[page] + in);
    } else
#endif
      now = load_u64(&v.buf->b[off]);
    if (now != m->val[i])
      return 0;
  }
  return 1;
}

/* The reuses after which memo m is walked again. */
static __always_inline __u32 uw_memo_recheck(const struct uw_memo *m) {
  __u32 a = m->agreed;
  return UW_MEMO_RECHECK << (a < UW_MEMO_RECHECK_DOUBLINGS
                                 ? a
                                 : UW_MEMO_RECHECK_DOUBLINGS);
}

/* Memo c was walked with these registers, address space and tables. */
static __always_inline bool uw_memo_matches(const struct uw_memo *c, __u64 pc,
                                            __u64 sp, __u64 bp, __u64 mm,
                                            __u64 map_count, __u32 epoch) {
  return c->nr && c->ip == pc && c->sp == sp && (c->bp == bp || c->any_bp) &&
         c->mm == mm && c->map_count == map_count && c->epoch == epoch;
}

/* The memo of `ms` whose registers and address space are these, if one;
 * the way used last first. */
static __always_inline struct uw_memo *
uw_memo_find(struct uw_memo_set *ms, __u64 pc, __u64 sp, __u64 bp, __u64 mm,
             __u64 map_count, __u32 epoch, __u32 *way) {
  for (__u32 k = 0; k < UW_MEMO_WAYS; k++) {
    __u32 i = (ms->last ^ k) & (UW_MEMO_WAYS - 1);
    struct uw_memo *c = &ms->way[i];
    if (uw_memo_matches(c, pc, sp, bp, mm, map_count, epoch)) {
      *way = i;
      return c;
    }
  }
  return NULL;
}

/* The way a new walk's memo replaces: each in turn, never the one used
 * last. */
static __always_inline __u32 uw_memo_victim(struct uw_memo_set *ms) {
  __u32 way = ms->next & (UW_MEMO_WAYS - 1);
  if (way == ms->last)
    way = (way + 1) & (UW_MEMO_WAYS - 1);
  ms->next = way + 1;
  return way;
}

/* The way the memo of a walk for a preempted wait replaces: an empty one
 * or one of another preemption, never a voluntary wait's (UW_MEMO_WAYS:
 * none, not kept). A thread preempted in user mode has a new pc each
 * time: its memo is rarely met again, and under pgbench such memos pushed
 * the backends' own places out of their ways. One preempted in a system
 * call (the write that woke its peer) is kept while a way is free. */
static __always_inline __u32 uw_memo_victim_preempted(struct uw_memo_set *ms) {
  for (__u32 k = 0; k < UW_MEMO_WAYS; k++) {
    __u32 i = (ms->next + k) & (UW_MEMO_WAYS - 1);
    const struct uw_memo *c = &ms->way[i];
    if (i != ms->last && (!c->nr || c->preempted)) {
      ms->next = i + 1;
      return i;
    }
  }
  return UW_MEMO_WAYS;
}

/* Why no memo of `ms` has the registers and address space of `r`
 * (UW_CAUSE_*): counted, to tell which check a walk came from. */
static __always_inline __u32 uw_miss_cause(const struct uw_memo_set *ms,
                                           const struct uw_start *r) {
  __u32 cause = UW_CAUSE_FIRST;
  for (__u32 i = 0; i < UW_MEMO_WAYS; i++) {
    const struct uw_memo *c = &ms->way[i];
    if (!c->nr)
      continue;
    if (c->ip == r->pc && c->sp == r->sp && (c->bp == r->bp || c->any_bp))
      return UW_CAUSE_MOVED;
    cause = UW_CAUSE_NEW_REGS;
  }
  return cause;
}

/* The memo of `ms` a walk from `r` uses: the one with these registers and
 * address space, checked, or else the way the walk will fill. *memo_stack:
 * the checked memo's stack, if it still holds (then, without
 * --verify-stack-reuse, that is the stack: no walk). `py_sig`: the
 * signature of the thread's Python chain now (0: not a Python process),
 * which a memo's must be. */
static __always_inline struct uw_memo *
uw_memo_pick(struct uw_memo_set *ms, const struct uw_start *r, bool frozen,
             struct uw_stats *st, __u32 *way, __u64 *memo_stack, __u64 py_sig,
             __u32 *cause, bool preempted) {
  struct uw_memo *m =
      uw_memo_find(ms, r->pc, r->sp, r->bp, r->mm, r->map_count, r->epoch, way);
  if (m && !(m->py_sig == py_sig && uw_memo_holds(m, r->pgd, frozen))) {
    /* A memo that does not check rbp (see uw_bp_used) has the registers
     * of every place reached with the same sp and ip: a function called
     * from two callers. Another way may be the other caller's. */
    struct uw_memo *o = NULL;
    for (__u32 k = 1; k < UW_MEMO_WAYS; k++) {
      __u32 i = (*way ^ k) & (UW_MEMO_WAYS - 1);
      struct uw_memo *c = &ms->way[i];
      if (uw_memo_matches(c, r->pc, r->sp, r->bp, r->mm, r->map_count,
                          r->epoch) &&
          c->py_sig == py_sig && uw_memo_holds(c, r->pgd, frozen)) {
        o = c;
        *way = i;
        break;
      }
    }
    if (o) {
      m = o;
    } else {
      uw_count(st, UW_STAT_REUSE_CHANGED);
      *cause = UW_CAUSE_CHANGED;
      /* Replaced in turn: the memo that missed may be another caller's,
       * found again when that caller's words are back. */
      *way = preempted ? uw_memo_victim_preempted(ms) : uw_memo_victim(ms);
      m = NULL;
    }
  } else if (!m) {
    if (uw_time_walks) /* else no cause: the verifier prunes it */
      *cause = uw_miss_cause(ms, r);
    *way = preempted ? uw_memo_victim_preempted(ms) : uw_memo_victim(ms);
  }
  if (m) {
    ms->last = *way;
    *memo_stack = m->stack;
    __u32 due = uw_memo_recheck(m);
    *cause = UW_CAUSE_REUSED;
    if (!preempted)
      m->preempted = 0; /* a voluntary wait's place too */
    if (++m->uses < due && !reuse_verify) {
      uw_count(st, UW_STAT_REUSED);
      return m;
    }
    /* Due for a fresh walk: compared with the memo's stack below. */
    if (m->uses >= due) {
      uw_count(st, UW_STAT_MEMO_RECHECKED);
      *cause = UW_CAUSE_RECHECK;
    } else {
      uw_count(st, UW_STAT_REUSED);
    }
  }
  /* A preemption's walk with no way to take notes into the spare one
   * (not a NULL memo: the verifier would check the walk twice). */
  __u32 w = *way < UW_MEMO_WAYS ? *way : UW_MEMO_WAYS;
  m = &ms->way[w];
  /* Noted afresh by this walk; kept only if it completes. */
  m->nr = 0;
  if (*memo_stack == OFFCPU_STACK_MISSED)
    m->agreed = 0; /* a new memo in this way: checked after the first 64 */
  return m;
}

/* The walk's state, per CPU (uw_frames, for context `slot`): its start
 * (f->start) is filled before the memo pick, the rest at its first frame
 * (uw_frame_reset). */
static __always_inline struct uw_frame *uw_frame_of(__u32 slot) {
  return bpf_map_lookup_elem(&uw_frames, &slot);
}

static __always_inline void uw_frame_reset(struct uw_frame *f, __u32 slot) {
  const struct uw_start *r = &f->start;
  __builtin_memset(f, 0, __builtin_offsetof(struct uw_frame, q));
  __builtin_memset(&f->note, 0, sizeof(f->note));
  f->note.sp = r->sp;
  f->pc = r->pc;
  f->sp = r->sp;
  f->bp = r->bp;
  f->max = stack_bytes() / sizeof(__u64);
  f->cache = slot;
  f->exact = 1;
  f->pgd = r->pgd;
}

/* Whose tables the walk of `t` (process `tgid`) uses, set in `f`: its
 * process's, its parent's (forked without exec: the parent's image), the
 * files' it maps (through bpf_find_vma, from the rewalk iterator), or none
 * (frame pointers; partial where tables are in use). Returns the process
 * entry used (NULL: none); *parent, *by_vma: which of the first three. */
static __always_inline struct uw_proc *
uw_walk_tables(struct uw_frame *f, struct task_struct *t, __u32 tgid,
               __u64 map_count, bool other_task, bool *parent, bool *by_vma) {
  __u32 owner = tgid;
  struct uw_proc *p = uw_tables ? bpf_map_lookup_elem(&uw_procs, &owner) : NULL;
  *parent = false;
  if (!p && uw_tables) {
    /* Forked without exec: the parent's image, its mappings. */
    owner = same_image_parent(t);
    if (owner)
      p = bpf_map_lookup_elem(&uw_procs, &owner);
    *parent = p != NULL;
  }
  *by_vma = false;
  /* A child's map_count is its own: only a reading of this process can be
   * stale. */
  bool stale = p && owner == tgid && p->map_count != map_count;
  if (p && !(stale && uw_find_vma && other_task)) {
    f->owner = owner;
    f->gen = p->gen;
    f->stale = stale;
  } else if (uw_find_vma && other_task) {
    /* Not installed yet (a fresh exec), or installed from a reading its
     * maps have changed since (one taken while ld.so was still mapping
     * its libraries), from the rewalk iterator: through the tables of the
     * files it maps, each address's mapping from the kernel
     * (uw_resolve_vma). */
    *by_vma = true;
    f->owner = tgid;
    f->gen = UW_GEN_BY_VMA;
  } else if (uw_tables) {
    f->partial = 1;
  } /* else frame pointers only (--user-unwind fp), complete as such */
  return p;
}

/* A walk begins, with the tables uw_walk_tables found. */
static __always_inline void uw_walk_begun(struct uw_stats *st, bool parent,
                                          bool by_vma, bool installed) {
  uw_count(st, UW_STAT_WALKS);
  if (parent)
    uw_count(st, UW_STAT_PARENT_MAPS);
  if (by_vma)
    uw_count(st, UW_STAT_BY_VMA);
  else if (!installed && uw_tables)
    uw_count(st, UW_STAT_NO_TABLES);
}

/* The walk's counts into the walker's statistics, once per walk. */
static __always_inline void uw_walk_counted(struct uw_stats *st,
                                            const struct uw_frame *f) {
  if (!st)
    return;
  st->v[UW_STAT_FRAMES_TABLE] += f->by_table;
  st->v[UW_STAT_FRAMES_FP] += f->by_fp;
  st->v[UW_STAT_CACHE_MISSES] += f->misses;
  __u64 end = f->end;
  same_register(end);
  if (end && end < UW_STAT_NR)
    st->v[end]++;
}

/* Keeps the memo the walk in `f` from `r` noted in way `way` of `ms`, if the
 * walk was whole and stored (`id`): the next walk from the same registers
 * may reuse it. `memo_stack`: the stack of the memo this walk checked
 * (OFFCPU_STACK_MISSED: none). */
static __always_inline void uw_memo_keep(struct uw_memo_set *ms, __u32 way,
                                         struct uw_memo *m,
                                         const struct uw_frame *f,
                                         const struct uw_start *r, __u64 id,
                                         __u64 py_sig, __u64 memo_stack) {
  const struct uw_noting *note = &f->note;
  if (!m || way >= UW_MEMO_WAYS || py_sig == PY_SIG_UNSURE || note->bad ||
      f->partial || f->end == UW_STAT_READ_FAULT || !stack_stored(id) ||
      !note->nr)
    return;
  /* Only a walk that reached an end of the stack (an end row, a frame
   * pointer chain's end, the depth limit): one that stopped outside the
   * mappings or at a bad frame is walked again next time. */
  __u16 end = f->end;
  if (end != UW_STAT_END_OF_STACK && end != UW_STAT_END_FP &&
      end != UW_STAT_TRUNCATED) {
    uw_count(uw_stats_of(f->cache), UW_STAT_MEMO_REFUSED);
    return;
  }
  m->ip = r->pc;
  m->sp = r->sp;
  m->bp = r->bp;
  m->any_bp = !f->bp_regs_used;
  /* A memo a voluntary wait met (or was made by) is a voluntary one. */
  m->preempted =
      f->preempted && (memo_stack == OFFCPU_STACK_MISSED || m->preempted);
  m->uses = 0;
  m->mm = r->mm;
  m->pgd = r->pgd;
  m->map_count = r->map_count;
  m->epoch = r->epoch;
  m->stack = id;
  /* A walk again that agreed: the next one comes twice as late. */
  if (memo_stack == id && m->agreed < UW_MEMO_RECHECK_DOUBLINGS)
    m->agreed++;
  else if (memo_stack != id)
    m->agreed = 0;
  m->span = note->span;
  m->py_sig = py_sig;
  m->nr = note->nr;
  ms->last = way;
}

/* The signature of thread `t`'s Python chain now, for its memos `ms` (0:
 * none needed). A Python thread's frames live in its heap, where the words
 * its memos check do not reach: its memos also hold the signature of the
 * chain they were stored with, which the chain, walked alone, must still
 * sign. Whether a process is Python is decided once (py_procs), and every
 * memo made before is dropped then (user space bumps uw_epoch): other
 * processes' memos have no signature, and their reuse looks no chain up. */
static __always_inline __u64 uw_py_sig_now(struct uw_memo_set *ms,
                                           struct task_struct *t, __u32 tgid,
                                           __u64 pgd, bool frozen, __u32 slot) {
  if (!ms)
    return 0;
  __u64 any = 0;
  for (__u32 i = 0; i < UW_MEMO_WAYS; i++)
    any |= ms->way[i].py_sig;
  if (!any)
    return 0;
  return py_chain_sig(t, tgid, pgd, frozen, slot, &ms->py_tstate);
}

/* Appends thread `t`'s Python frames to `s` after the native frames of
 * walk `f`, if its process is Python; returns the count and sets *py_sig
 * to the chain's signature for the memo (0: not a Python process). */
static __always_inline __u32
uw_py_append(struct task_struct *t, __u32 tgid, bool other_task,
             struct offcpu_stack *s, const struct uw_frame *f, __u64 pgd,
             bool frozen, __u32 slot, struct uw_memo_set *ms, __u64 *py_sig) {
  const struct offcpu_py_proc *py = other_task ? NULL : py_proc_of(tgid);
  *py_sig = 0;
  if (!py)
    return f->n;
  return py_append(t, py, s, f->n, f->max, pgd, frozen, slot,
                   ms ? &ms->py_tstate : NULL, py_sig);
}

/* With --time-walks, a stack reused or walked from a thread's memos, by
 * why (`cause`) and by how its wait began, and its ns since `t0`: off,
 * the verifier prunes the causes (their constants on each way through the
 * memo pick more than doubled the switch hook's instructions). */
static __always_inline void uw_cause_count(struct uw_stats *st, __u32 cause,
                                           bool preempted, __u64 t0) {
  if (!uw_time_walks)
    return;
  /* 64-bit indexes, each checked where it is used: the cause is read
   * back from memory (uw_frame), unbounded until checked. */
  __u64 i =
      (preempted ? UW_STAT_CAUSE_PREEMPTED : UW_STAT_CAUSE) + (__u64)cause;
  same_register(i);
  if (!st || i >= UW_STAT_CAUSE_NS)
    return;
  st->v[i]++;
  __u64 dt = bpf_ktime_get_ns() - t0;
  __u64 j = i + 2 * UW_CAUSE_NR;
  same_register(j);
  if (j < UW_STAT_NR)
    st->v[j] += dt;
}

/* Whether the caller said the wait began with a preemption; cleared. */
static __always_inline bool uw_take_preempted(__u32 *flags) {
  bool preempted = *flags & OFFCPU_USTACK_PREEMPTED;
  *flags &= ~OFFCPU_USTACK_PREEMPTED;
  return preempted;
}

/* Fills f->start (and f->tgid) from task `t`'s user registers at its
 * system call and its address space; false without registers. */
static __always_inline bool
uw_start_of(struct uw_frame *f, struct task_struct *t, bool other_task) {
  struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
  if (!regs)
    return false;
  /* BTF pointers: plain loads, no helper call each. */
  struct mm_struct *mmp = TASK_FIELDS(t)->mm;
  struct uw_start *r = &f->start;
  r->pc = regs->ip;
  r->sp = regs->sp;
  r->bp = regs->bp;
  r->mm = (__u64)mmp;
  r->map_count = mmp ? uw_map_key(mmp) : 0;
  r->epoch = *(volatile __u32 *)&uw_epoch;
  r->pgd = 0;
  f->tgid = t->tgid;
#ifdef OFFCPU_DIRECT_LOADS
  if (!other_task && uw_direct_base)
    r->pgd = pgd_of(mmp);
#endif
  return true;
}

/* The user stack of `t`: the current task; or, `frozen`, a task off CPU
 * since its switch-out (the switch hook's next task, or one the flush finds
 * blocked), read through its page tables; or, `other_task`, a blocked one
 * from a sleepable iterator. With tables where the process has them, else
 * frame pointers. Sets OFFCPU_USTACK_PARTIAL in *flags when the walk lacked
 * tables and should be taken again. `ms` (the task's memos, from the switch
 * hook; NULL: none): reuse one of its last stacks where a memo holds, and
 * keep a memo of this walk; *reused says which it was. `slot`: the caller's
 * scratch buffers. */
static __always_inline __u64 walk_user_stack_memo(struct task_struct *t,
                                                  bool other_task, __u32 *flags,
                                                  struct uw_memo_set *ms,
                                                  bool *reused, bool frozen,
                                                  __u32 slot) {
  *reused = false;
#ifndef OFFCPU_LIGHT_OBJECT
  /* Without tables: the frame-pointer walk, which needs no bpf_loop. The
   * light objects (bpf_loop kernels) walk frame pointers with the table
   * walker instead, which has memos: one walker less to load. */
  if (!uw_tables) {
    uw_take_preempted(flags);
    return walk_user_stack_fp(t, other_task);
  }
#endif
  /* The walk's state and scalars live in f (per CPU), not on the BPF
   * stack: see struct uw_frame. */
  struct uw_frame *f = uw_frame_of(slot);
  if (!f) {
    uw_take_preempted(flags);
    return OFFCPU_STACK_MISSED;
  }
  f->preempted = uw_take_preempted(flags);
  f->t0 = uw_time_walks ? bpf_ktime_get_ns() : 0;
  if (!uw_start_of(f, t, other_task))
    return OFFCPU_STACK_MISSED;
  struct uw_start *r = &f->start;
  struct uw_stats *st = uw_stats_of(slot);
  if (frozen && !r->pgd)
    return OFFCPU_STACK_MISSED; /* never: frozen walks come with the map */

  /* A memo that holds: the stack this walk would store, before any other
   * work (the walk's state is set up after). */
  struct uw_memo *m = NULL;
  f->way = 0;
  f->memo_stack = OFFCPU_STACK_MISSED;
  ms = reuse_stacks && !other_task ? ms : NULL;
  f->py_sig = uw_py_sig_now(ms, t, f->tgid, r->pgd, frozen, slot);
  f->cause = UW_CAUSE_FIRST;
  if (ms) {
    m = uw_memo_pick(ms, r, frozen, st, &f->way, &f->memo_stack, f->py_sig,
                     &f->cause, f->preempted);
    if (f->memo_stack != OFFCPU_STACK_MISSED && !reuse_verify &&
        f->cause == UW_CAUSE_REUSED) {
      *reused = true;
      uw_cause_count(st, f->cause, f->preempted, f->t0);
      return f->memo_stack;
    }
  }

  uw_frame_reset(f, slot);
  /* Walking after all: the scratch buffer. */
  struct offcpu_stack *s = scratch_stack(slot);
  if (!s)
    return OFFCPU_STACK_MISSED;
  struct uw_proc *p = uw_walk_tables(f, t, f->tgid, r->map_count, other_task,
                                     &f->parent, &f->by_vma);
  /* A stale reading still serves: the memo keys on map_count and the
   * epoch, so a walk now would be this same walk. Without tables the walk
   * is partial and not kept. */
  uw_walk_begun(st, f->parent, f->by_vma, p != NULL);
  {
    /* The loop's context, in a block of its own: its stack slot is free
     * again for the Python walk's below (the 512 bytes a chain shares). m:
     * the memo this walk notes (NULL: none). */
    struct uw_walk w = {.task = t, .f = f, .m = m, .frozen = frozen};
    w.preempted = f->preempted;
    w.s = s;
    bpf_loop(OFFCPU_MAX_STACK_DEPTH + 1,
             other_task ? uw_step_other : uw_step_current, &w, 0);
  }
  uw_walk_counted(st, f);
  if (f->partial) {
    *flags |= OFFCPU_USTACK_PARTIAL;
    /* A file left deferred is built for the entry that holds it: a child
     * forked without exec walks with its parent's. */
    uw_request(f->ask_pc && f->owner ? f->owner : f->tgid, r->map_count, st, f);
  } else if (f->by_vma) {
    uw_request(f->tgid, r->map_count, st, f); /* its own tables, later walks */
  }
  __u32 n = uw_py_append(t, f->tgid, other_task, s, f, r->pgd, frozen, slot, ms,
                         &f->py_sig);
  __u64 id = store_stack_from(
      slot, s, (long)n * sizeof(__u64),
      OFFCPU_STACK_USER |
          (f->end == UW_STAT_TRUNCATED ? OFFCPU_STACK_TRUNCATED : 0));
  if (f->memo_stack != OFFCPU_STACK_MISSED && f->memo_stack != id &&
      stack_stored(id))
    uw_count(st, UW_STAT_REUSE_MISMATCH);
  uw_memo_keep(ms, f->way, m, f, r, id, f->py_sig, f->memo_stack);
  uw_cause_count(ms ? st : NULL, f->cause, f->preempted, f->t0);
  return id;
}

#ifdef OFFCPU_DIRECT_LOADS
/* uw_walk_hook's mode bits. */
#define UW_HOOK_FROZEN 1u /* the task is off CPU since its switch-out */
#define UW_HOOK_ITER 2u   /* called from an iterator (its scratch slot) */

/* walk_user_stack_memo for the hooks and the flush (not the sleepable
 * iterator's walks): a global function, verified once however many places
 * in a program walk (the switch hook does twice: the task switched in, with
 * its stack taken at switch-in, and the one switched out). Sets
 * OFFCPU_USTACK_REUSED in *flags when the stack was a memo's. Its pointer
 * arguments are tagged for the verifier (6.8+). */
__noinline __u64 uw_walk_hook(struct task_struct *t __arg_trusted,
                              struct uw_memo_set *ms, __u32 *flags,
                              __u32 mode) {
  if (!flags)
    return OFFCPU_STACK_MISSED;
  bool reused = false;
  __u64 id =
      walk_user_stack_memo(t, false, flags, ms, &reused, mode & UW_HOOK_FROZEN,
                           mode & UW_HOOK_ITER ? SCRATCH_ITER : SCRATCH_HOOK);
  if (reused)
    *flags |= OFFCPU_USTACK_REUSED;
  return id;
}
#endif

/* The user stack of the current task (frozen: false) or of one off CPU
 * since its switch-out, from a hook or the flush (slot); *reused: as
 * walk_user_stack_memo's. */
static __always_inline __u64 walk_user_stack_hook(struct task_struct *t,
                                                  __u32 *flags,
                                                  struct uw_memo_set *ms,
                                                  bool *reused, bool frozen,
                                                  __u32 slot) {
#ifdef OFFCPU_DIRECT_LOADS
  __u32 out = *flags & OFFCPU_USTACK_PREEMPTED;
  *flags &= ~OFFCPU_USTACK_PREEMPTED;
  __u64 id = uw_walk_hook(t, ms, &out,
                          (frozen ? UW_HOOK_FROZEN : 0) |
                              (slot == SCRATCH_ITER ? UW_HOOK_ITER : 0));
  *reused = out & OFFCPU_USTACK_REUSED;
  *flags |= out & ~OFFCPU_USTACK_REUSED;
  return id;
#else
  if (frozen)
    return OFFCPU_STACK_MISSED; /* needs the page-table reads */
  return walk_user_stack_memo(t, false, flags, ms, reused, false, slot);
#endif
}

/* Whether the current task's user stack may be left for its switch-in:
 * only when one of the thread's memos has the registers it blocks with.
 * Then the check (or the walk, if a word changed) runs at switch-in on the
 * stack frozen since, through the page tables, and only for waits that pass
 * -m/-M. Without such a memo the walk is done now: the process may have no
 * tables yet, and a partial stack is walked again only while its thread is
 * still blocked. */
static __always_inline bool uw_can_defer(struct task_struct *t,
                                         struct uw_memo_set *ms, __u32 *way) {
  if (!uw_defer || !ms)
    return false;
  struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
  struct mm_struct *mmp = TASK_FIELDS(t)->mm;
  if (!regs || !mmp)
    return false;
  struct uw_memo *m =
      uw_memo_find(ms, regs->ip, regs->sp, regs->bp, (__u64)mmp,
                   uw_map_key(mmp), *(volatile __u32 *)&uw_epoch, way);
  /* Not a Python thread's: its chain is checked at switch-out. */
  return m && !m->py_sig;
}

/* The user stack left for the switch-in (uw_can_defer) by a task off CPU
 * since: memo `way` matched its registers, address space and tables when
 * it blocked, and the task has not run since, so the memo's stack is the
 * one it blocked with (whatever changed in the address space meanwhile)
 * if its words still hold. They are read through the page table kept with
 * the memo: none of the task's memory but its stack is read.
 * OFFCPU_STACK_MISSED: a word changed: walk. */
static __always_inline __u64 uw_deferred_memo(struct uw_memo_set *ms,
                                              __u32 way) {
  if (!ms)
    return OFFCPU_STACK_MISSED;
  way &= UW_MEMO_WAYS - 1;
  struct uw_memo *m = &ms->way[way];
  /* Due for a fresh walk: the walk's uw_memo_pick counts it and checks. */
  if (!m->nr || m->uses + 1 >= uw_memo_recheck(m) ||
      !uw_memo_holds(m, m->pgd, 1))
    return OFFCPU_STACK_MISSED;
  m->uses++;
  ms->last = way;
  return m->stack;
}

/* Memos not to be trusted (the announcement of their stack was lost: the
 * next wait must announce it again). */
static __always_inline void uw_memo_forget(struct uw_memo_set *ms) {
  if (ms)
    for (__u32 i = 0; i < UW_MEMO_WAYS; i++)
      ms->way[i].nr = 0;
}

static __always_inline __u64 walk_user_stack(struct task_struct *t,
                                             bool other_task, __u32 *flags) {
  bool reused;
  return walk_user_stack_memo(t, other_task, flags, NULL, &reused, false,
                              other_task ? SCRATCH_ITER : SCRATCH_HOOK);
}

/* A partial stack charged before it could be walked again, with the time
 * charged on it (0: outside -m/-M), for the share of off-CPU time. */
static __always_inline void uw_partial_ended(__u32 flags, __u32 slot,
                                             __u64 charged_ns) {
  if (!(flags & OFFCPU_USTACK_PARTIAL))
    return;
  struct uw_stats *st = uw_stats_of(slot);
  uw_count(st, UW_STAT_PARTIAL_ENDED);
  if (st)
    st->v[UW_STAT_PARTIAL_NS] += charged_ns;
}

#endif /* OFFCPU_USER_UNWIND_BPF_H */
