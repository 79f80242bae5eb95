/* User stacks without frame pointers: the tables user space builds from a
 * file's CFI (.eh_frame, or .debug_frame from its debug file) and the BPF
 * walker (bpf/user_unwind.bpf.h) reads. Shared by BPF and C++; the only
 * definition of each layout.
 *
 * Design.
 * - Per file (keyed by build id, else device and inode), user space
 *   (src/unwind/) runs the CFI programs once and keeps, for every address
 *   where the rule changes, a row: how to find the CFA (rsp or rbp plus an
 *   offset, or a word loaded from there), where the caller's rbp was saved,
 *   or "end of stack", "PLT stub", "signal frame", "no CFI here". Rules are
 *   deduplicated into one small table (uw_rules: a few thousand distinct
 *   rules cover a whole system), so a row is 4 bytes: its offset in a 4 KiB
 *   page of the file's code and a rule id. Rows live in one array
 *   (uw_rows, 16 per element); each file has a run of page descriptors
 *   (uw_pages: first row, row count; in up to UW_FILE_RUNS runs, gaps
 *   between functions left out) so a lookup is one page read and a
 *   binary search of ~50 rows (6 steps), not a search of the whole file.
 *   OpenTelemetry's profiler uses 64 KiB pages (a search of ~1,000 rows);
 *   4 KiB pages cost 2 bytes per KiB of code more and make each search
 *   short. Tables are loaded once per file and shared by every process.
 * - Per traced process, user space installs its executable mappings
 *   (uw_procs: sorted ranges, each with its file's table, or "no table":
 *   JIT code, Go, files without CFI, where the frame-pointer walk goes on),
 *   and the mm's map_count when it read them: a walk that leaves the known
 *   mappings of a process whose map_count moved since (dlopen, exec) asks
 *   for a new reading instead of calling the address junk. We only load
 *   tables for files that traced processes map, on demand.
 * - Walk (bpf_loop, one frame per iteration): mapping search and row
 *   search run in global functions (verified once), behind a per-CPU cache
 *   of (process, address) -> rule, so a frame seen before costs one array
 *   read and the stack reads. A walk that reaches an address outside every
 *   executable mapping stops there (no [anon]/[heap] frames); every other
 *   way a walk ends is counted by cause (uw_stats, shown by -v).
 * - Whole-system runs build a process's tables for its program, libc and
 *   the loader at its install; its other files (UW_FILE_DEFERRED) when a
 *   walk first reaches them, which stops there and asks (uw_request.pc).
 * - Not ready yet: a process with no installed mappings (new, or traced
 *   from the start) is walked with frame pointers, its wait flagged
 *   partial and its tables requested through a ring (uw_requests, once per
 *   map_count). Once they are installed, user space reruns the sleepable
 *   iterator that walks blocked threads' stacks in their own memory: a
 *   thread still blocked gets its whole stack (its user stack cannot change
 *   while it sleeps). A partial wait that ends first is charged as it is
 *   and counted. A process forked without exec uses its parent's mappings.
 * - Fallbacks: --user-unwind fp forces the frame-pointer walk; kernels
 *   without bpf_loop (before 5.17) or tp_btf walk frame pointers only.
 * - Cost: per frame, one cache read (a miss: ~8 mapping and ~6 row search
 *   steps) and one or two 8-16 byte user reads, as the frame-pointer walk. */
#ifndef OFFCPU_UNWIND_H
#define OFFCPU_UNWIND_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Executable mappings per process that tables can cover; the rest are
 * walked with frame pointers (counted). */
#define UW_MAX_MAPPINGS 256
#define UW_PAGE_SHIFT 12
#define UW_PAGE_SIZE (1u << UW_PAGE_SHIFT)
#define UW_ROWS_PER_CHUNK 16
/* A row: offset in its page (high 16 bits), rule id (low 16 bits). */
#define UW_ROW_RULE_MASK 0xffffu
#define UW_ROW_OFFSET_SHIFT 16
#define UW_MAX_RULES 65536
/* uw_mapping.file of a mapping with no table: the frame-pointer walk. */
#define UW_FILE_NONE 0xffffffffu
/* uw_mapping.file of a file whose table is built when a walk first reaches
 * it (runs of every process): the walk stores that frame and stops there,
 * partial, and asks for the file (uw_request.pc). A server maps many
 * libraries its stacks never pass through: of postgres's 3.1 MB of
 * .eh_frame, 0.8 MB (its own and libc's) are on its stacks under pgbench. */
#define UW_FILE_DEFERRED 0xfffffffeu
#define UW_MAX_FILES 8192

/* What a rule says about a frame. Rule id 0 is UW_RULE_NONE. */
enum uw_rule_kind {
  UW_RULE_NONE = 0,    /* no CFI covers the address: frame-pointer guess */
  UW_RULE_CFA,         /* CFA = reg + cfa_off; return address at CFA - 8 */
  UW_RULE_CFA_DEREF,   /* CFA = *(reg + cfa_off) (stack realignment) */
  UW_RULE_END,         /* return address undefined: the outermost frame */
  UW_RULE_PLT,         /* PLT stub: CFA = rsp + 8, +8 past the push */
  UW_RULE_SIGNAL,      /* sigreturn trampoline: registers in the ucontext */
  UW_RULE_UNSUPPORTED, /* CFI this walker cannot follow: the walk stops */
};

/* uw_rule.flags */
#define UW_CFA_FROM_BP 1u  /* CFA base register is rbp, else rsp */
#define UW_BP_SAVED 2u     /* caller's rbp at CFA + bp_off (SIGNAL: rsp +) */
#define UW_BP_UNDEFINED 4u /* caller's rbp cannot be recovered */

struct uw_rule {
  __s32 cfa_off; /* SIGNAL: offset of the saved rsp from rsp (rip follows) */
  __s16 bp_off;
  __u8 kind;
  __u8 flags;
};

struct uw_mapping {
  __u64 start, end; /* [start, end) in the process */
  __u64 base;       /* address - base = offset in the file's table */
  __u32 file;       /* uw_files index, or UW_FILE_NONE */
  __u32 pad;
};

/* Files with tables by identity, for processes not installed yet (a fresh
 * exec): the walk finds the mapping of an address with bpf_find_vma (5.17+)
 * and the file's table through this (device as the kernel numbers it,
 * inode). An executable segment's file offsets [lo, hi) are at virtual
 * address offset + delta in the file's table. */
struct uw_file_key {
  __u64 dev, ino;
};
#define UW_FILE_SEGS 2
struct uw_file_seg {
  __u64 lo, hi;
  __s64 delta;
};
struct uw_file_id {
  __u32 file; /* uw_files index */
  __u32 nsegs;
  __u64 table_base;
  struct uw_file_seg seg[UW_FILE_SEGS];
};

/* uw_frame.gen of a walk through bpf_find_vma: its rules are not cached,
 * its process has no reading. The gens user space gives installed
 * contents count up from 1 and stay below it. */
#define UW_GEN_BY_VMA 0x80000000u
#define UW_GEN_LIMIT UW_GEN_BY_VMA

struct uw_proc {
  __u32 nr;        /* mappings used, sorted by start */
  __u32 gen;       /* the rule cache's key: one per distinct content of
                      nr and maps (user space), never reused for another */
  __u64 map_count; /* uw_map_key when the maps were read: mm->map_count ^
                      mm->start_stack << 16 */
  struct uw_mapping maps[UW_MAX_MAPPINGS];
};

/* A file's pages are a few runs of page descriptors in uw_pages: pages
 * that have rows or lie under a rule, the gaps between runs left out, so a
 * file's index costs its rows, not the span of its addresses (two FDEs
 * 2^47 apart are two runs of one page). Read inline with the file entry:
 * no more map reads per lookup than one run. */
#define UW_FILE_RUNS 4
struct uw_page_run {
  __u64 first_page; /* page number in the file's table (address >> 12) */
  __u32 n_pages;    /* 0: unused */
  __u32 page_base;  /* uw_pages index of the run's first page */
};
struct uw_file {
  struct uw_page_run runs[UW_FILE_RUNS]; /* sorted by first_page */
};

/* uw_pages element: first row (index in uw_rows' row space) | count << 32.
 * A page whose code starts under a rule carries it in a row at offset 0. */
struct uw_chunk {
  __u32 rows[UW_ROWS_PER_CHUNK];
};

/* Asked by the walker when a process has no (or stale) installed
 * mappings, or when a walk reached a file left UW_FILE_DEFERRED. */
struct uw_request {
  __u32 tgid;
  __u32 pad;
  __u64 pc; /* 0, or an address in the file left UW_FILE_DEFERRED */
};

/* uw_asked's value: the map_count a process was last asked about (one
 * request per change), and the walks its threads made since without its
 * tables: user space serves the processes walked most lately first. Not
 * atomic (a lost count only moves a process in the queue). */
struct uw_demand {
  __u64 map_count;
  __u64 walks;
};

/* A thread's stack memo is walked again after this many reuses, and a walk
 * that disagrees is counted (UW_STAT_REUSE_MISMATCH, reported as a bug): a
 * thread that blocks at one place for a whole run reused its first walk
 * for the whole run, so whatever went wrong in that one walk (issue #27:
 * every wait cut to clock_nanosleep) stayed wrong, and silent. One walk in
 * 64 waits costs little next to a walk for each; after each walk again that
 * agreed the memo waits twice as long, up to 16 times (bpf/user_unwind.bpf.h,
 * UW_MEMO_RECHECK_DOUBLINGS): one walk each 64 waits was still a tenth of
 * a futex wait's cost. */
#define UW_MEMO_RECHECK 64

/* Why a thread's user stack was walked rather than reused, or that it
 * was reused (UW_CAUSE_REUSED): see uw_memo_pick. */
enum uw_cause {
  UW_CAUSE_REUSED = 0, /* a memo held: no walk */
  UW_CAUSE_FIRST,      /* the thread had no memo */
  UW_CAUSE_NEW_REGS,   /* no memo with these registers (a new place, or
                          its memo's way was replaced) */
  UW_CAUSE_MOVED,      /* a memo with these registers, but the address
                          space or the tables' epoch moved since */
  UW_CAUSE_CHANGED,    /* a memo with these registers, a word changed */
  UW_CAUSE_RECHECK,    /* a memo held, due for a walk again */
  UW_CAUSE_NR,
};

/* Counters of the walker, by cause; per CPU, summed by user space. */
enum uw_stat {
  UW_STAT_WALKS = 0,     /* user stacks walked with tables enabled */
  UW_STAT_FRAMES_TABLE,  /* frames recovered through a table row */
  UW_STAT_FRAMES_FP,     /* frames recovered from frame pointers */
  UW_STAT_END_OF_STACK,  /* walks that reached an end-of-stack row */
  UW_STAT_END_FP,        /* frame-pointer chains that ended (rbp 0) */
  UW_STAT_OUTSIDE,       /* stopped at an address outside exec mappings */
  UW_STAT_READ_FAULT,    /* a stack word could not be read */
  UW_STAT_UNSUPPORTED,   /* CFI the walker cannot follow */
  UW_STAT_BAD_FRAME,     /* a frame that did not move up the stack */
  UW_STAT_TRUNCATED,     /* deeper than --perf-max-stack-depth */
  UW_STAT_NO_TABLES,     /* process not installed yet: partial, FP walk */
  UW_STAT_STALE,         /* left known mappings after map_count moved */
  UW_STAT_REQUESTS,      /* tables asked for through uw_requests */
  UW_STAT_REQUESTS_LOST, /* the request ring was full */
  UW_STAT_REWALKED,      /* partial stacks walked again while blocked */
  UW_STAT_PARTIAL_ENDED, /* partial stacks charged before a rewalk */
  UW_STAT_PARENT_MAPS,   /* walks that used the parent's (fork) mappings */
  UW_STAT_CACHE_MISSES,  /* rule lookups that searched the tables */
  /* Stack reuse (user at switch-out, kernel at switch-in): */
  UW_STAT_REUSED,          /* user stacks reused from the thread's memo */
  UW_STAT_REUSE_CHANGED,   /* same registers, but a stack word had changed */
  UW_STAT_REUSE_MISMATCH,  /* --verify-stack-reuse: the walk disagreed */
  UW_STAT_KREUSED,         /* kernel stacks reused */
  UW_STAT_KREUSE_CHANGED,  /* same stack pointer, a word had changed */
  UW_STAT_KREUSE_MISMATCH, /* --verify-stack-reuse: the walk disagreed */
  UW_STAT_BY_VMA, /* walks of processes not installed yet, by their files */
  UW_STAT_REUSE_PROBE_READ, /* memo checks that read the stack by probe read
                               (not through the direct map) */
  UW_STAT_DEFERRED,    /* user stacks left for the switch-in (uw_can_defer) */
  UW_STAT_DEFER_TAKEN, /* of those, taken then for a wait that passed -m */
  UW_STAT_DEFER_LOST,  /* the task ran unseen first: its stack is missed */
  UW_STAT_PARTIAL_NS,  /* off-CPU ns of the waits in UW_STAT_PARTIAL_ENDED
                          that were charged (within -m/-M) */
  UW_STAT_MEMO_RECHECKED, /* memos walked again after UW_MEMO_RECHECK uses */
  UW_STAT_MEMO_REFUSED,   /* whole walks not kept as memos: they did not end
                             at an end of stack (outside, bad frame...) */
  UW_STAT_KMEMO_UNKEPT,   /* kernel walks not kept as memos: too many words
                             read, or too far from the stack pointer */
  UW_STAT_KWALKS,         /* kernel stacks walked where memos are kept */
  UW_STAT_DEFERRED_FILE,  /* walks stopped at a file whose table was not
                             built yet (UW_FILE_DEFERRED): partial */
  /* With --time-walks, user stacks of the threads' memos by why they were
   * walked (enum uw_cause), for waits that began voluntarily, then for
   * those that began with a preemption (task running at switch-out). */
  UW_STAT_CAUSE,
  UW_STAT_CAUSE_PREEMPTED = UW_STAT_CAUSE + UW_CAUSE_NR,
  /* With --time-walks: their BPF ns, by the same classes. */
  UW_STAT_CAUSE_NS = UW_STAT_CAUSE_PREEMPTED + UW_CAUSE_NR,
  UW_STAT_CAUSE_PREEMPTED_NS = UW_STAT_CAUSE_NS + UW_CAUSE_NR,
  UW_STAT_NR = UW_STAT_CAUSE_PREEMPTED_NS + UW_CAUSE_NR,
};

struct uw_stats {
  __u64 v[UW_STAT_NR];
};

#endif /* OFFCPU_UNWIND_H */
