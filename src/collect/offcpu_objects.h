/* The maps and programs of offcpu.bpf.c that user space reaches, one line
 * each. Everything the loaders keep per map or program is derived from
 * these lists: the sizes set before load, the descriptors taken after it
 * (from libbpf's skeleton in offcpu_session.cpp, from the light one in
 * light_loader.c) and the autoload choices. A new map is one line here (in
 * the list that says what the loader does with it) and its use. C, for the
 * light loader. */
#ifndef OFFCPU_OBJECTS_H
#define OFFCPU_OBJECTS_H

/* Maps the loader sizes, that every program built from bpf/'s shared
 * modules has (settings, task_filter, stack_store, user_unwind, waker):
 * offcpu and rwsem alike (collect/bpf_setup.h). */
#define OFFCPU_SHARED_SIZED_MAPS(X)                                            \
  X(filter_tgids)                                                              \
  X(filter_tids)                                                               \
  X(filter_cgroups)                                                            \
  X(stacks)                                                                    \
  X(deep_stacks)                                                               \
  X(wakers)                                                                    \
  X(uw_files)                                                                  \
  X(uw_pages)                                                                  \
  X(uw_rows)                                                                   \
  X(uw_rules)

/* Maps the loader sizes: the shared ones and offcpu's own. */
#define OFFCPU_SIZED_MAPS(X)                                                   \
  OFFCPU_SHARED_SIZED_MAPS(X)                                                  \
  X(counts)                                                                    \
  X(starts_hash)                                                               \
  X(events) /* the timeline's ring buffer (--events-memory) */

/* Maps created only when the plan uses them (libbpf's skeleton; the light
 * one serves only plans that use all of them). */
#define OFFCPU_OPTIONAL_MAPS(X)                                                \
  X(new_processes) /* announcements: ring buffer, 5.8+ */                      \
  X(starts_task)   /* task storage, 5.11+ */                                   \
  X(waker_memos)   /* task storage, 5.11+ */

/* Maps at their built-in size, always created. */
#define OFFCPU_FIXED_MAPS(X)                                                   \
  X(counts_overflow)                                                           \
  X(waits_charged)                                                             \
  X(uw_procs)                                                                  \
  X(uw_file_ids)                                                               \
  X(uw_requests)                                                               \
  X(uw_asked)                                                                  \
  X(uw_stat_map)                                                               \
  X(py_procs)                                                                  \
  X(py_threads)                                                                \
  X(py_walks)                                                                  \
  X(py_stat_map)                                                               \
  X(starts_spill)

#define OFFCPU_MAPS(X)                                                         \
  OFFCPU_SIZED_MAPS(X) OFFCPU_OPTIONAL_MAPS(X) OFFCPU_FIXED_MAPS(X)

/* Programs in every object, the light ones too (tp_btf plans). */
#define OFFCPU_PROGS(X)                                                        \
  X(offcpu_switch_btf)                                                         \
  X(offcpu_waking_btf)                                                         \
  X(offcpu_fork_btf)                                                           \
  X(offcpu_seed_open)                                                          \
  X(offcpu_seed_stacks)                                                        \
  X(offcpu_flush)

/* Programs in the regular object only (raw_tp plans: kernels without a
 * working tp_btf). */
#define OFFCPU_RAW_PROGS(X)                                                    \
  X(offcpu_switch_raw)                                                         \
  X(offcpu_waking_raw)                                                         \
  X(offcpu_fork_raw)

/* offcpu lock --futex: the lock object's (rwsem.bpf.c, futex.bpf.h)
 * programs, loaded together; the hooks attached, the iterator run at stop.
 * Its maps: futex_tasks (task storage), futex_waits (sized as waits). */
#define OFFCPU_FUTEX_PROGS(X)                                                  \
  X(futex_switch)                                                              \
  X(futex_waking)                                                              \
  X(futex_open)

/* Entries of each sized map; both loaders take these. */
struct offcpu_map_sizes {
#define OFFCPU_SIZE_FIELD(name) unsigned int name;
  OFFCPU_SIZED_MAPS(OFFCPU_SIZE_FIELD)
#undef OFFCPU_SIZE_FIELD
};

/* Descriptors of every map and program, once loaded (-1: not created or
 * not loaded). */
struct offcpu_fds {
#define OFFCPU_FD_FIELD(name) int name;
  OFFCPU_MAPS(OFFCPU_FD_FIELD)
  OFFCPU_PROGS(OFFCPU_FD_FIELD)
  OFFCPU_RAW_PROGS(OFFCPU_FD_FIELD)
#undef OFFCPU_FD_FIELD
};

#endif /* OFFCPU_OBJECTS_H */
