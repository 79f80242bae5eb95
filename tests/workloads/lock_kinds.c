// Threads that contend kernel locks of the kinds lock_contend.c does not,
// each in a named function, for offcpu lock's per-kind tests
// (tests/integration/lock_kinds_test.cpp). Built with frame pointers;
// system calls are inline `syscall`s from the named functions, so the user
// stack is exact (glibc has no frame pointers).
//   lock_kinds console [THREADS]  write_console: thread i writes lines to
//       the virtual console /dev/tty(i+1); each tty has its own write
//       mutex, but every console write takes console_lock(), the global
//       console_sem: a semaphore (flags 0)
//   lock_kinds uprobe [REGISTRARS [FORKERS]]  register_uprobe: each
//       "registrar" attaches an empty BPF program to 64 places of its own
//       in this binary (a uprobe_multi link) and closes it, each uprobe's
//       registration and removal taking dup_mmap_sem, a
//       percpu_rw_semaphore, for writing: they wait for each other
//       (percpu-rwsem:write); the "forker" threads fork a child that exits
//       at once, in fork_child, each fork taking it for reading: they wait
//       while a registrar holds it (percpu-rwsem:read)
//   lock_kinds pi [THREADS [HOLD_US]]  lock_pi_word: a futex word taken
//       with FUTEX_LOCK_PI when contended, held HOLD_US (default 2000)
//       asleep; the kernel queues the waiters on an rt_mutex
//   lock_kinds readdir DIR [THREADS]  THREADS "lister" threads read DIR's
//       entries in list_dir (getdents64 takes the directory's i_rwsem for
//       reading) while as many "maker" threads mkdir/rmdir in it in
//       make_and_remove (for writing): the listers wait (rwsem:read)
// Prints "ready PID" and runs until killed; exits 3 with a line on stderr
// when the machine lacks what the mode needs (no virtual consoles, no
// uprobe_multi links).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

#define NOINLINE __attribute__((noinline))

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

// ---- console: console_sem ----

static const char kLine[] =
    "lock_kinds: a line for the console, long enough to take a while\n";

NOINLINE void write_console(int fd) {
  raw_syscall3(SYS_write, fd, (long)kLine, sizeof(kLine) - 1);
  __asm__ volatile("" ::: "memory");
}

static void *console_thread(void *arg) {
  int fd = (int)(long)arg;
  for (;;)
    write_console(fd);
  return NULL;
}

// ---- fork ----

// fork(): dup_mmap takes dup_mmap_sem for reading (uprobes' hold-off of
// new mappings). The child leaves at once by a raw exit (no libc in the
// copy).
NOINLINE void fork_child(void) {
  long pid = raw_syscall6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
  if (pid == 0)
    raw_syscall3(SYS_exit, 0, 0, 0);
  if (pid > 0)
    raw_syscall6(SYS_wait4, pid, 0, 0, 0, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *forker_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "forker");
  for (;;)
    fork_child();
  return NULL;
}

// ---- uprobe: dup_mmap_sem ----

// Registering a uprobe takes dup_mmap_sem, a percpu_rw_semaphore, for
// writing; so does removing it. Each "registrar" thread attaches an empty
// BPF program to a function of this binary of its own by a uprobe_multi
// link and closes it again: the registrations contend as writers
// (percpu-rwsem:write). (A perf event's uprobe would not: perf serializes
// them under event_mutex first.) The uapi headers may predate uprobe_multi
// (6.6): its numbers and bpf_attr's layout for it are spelled out here.
#define LK_BPF_PROG_LOAD 5
#define LK_BPF_LINK_CREATE 28
#define LK_BPF_PROG_TYPE_KPROBE 2
#define LK_BPF_TRACE_UPROBE_MULTI 48

struct lk_prog_load {
  uint32_t prog_type, insn_cnt;
  uint64_t insns, license;
  uint32_t log_level, log_size;
  uint64_t log_buf;
  uint32_t kern_version, prog_flags;
  char prog_name[16];
  uint32_t prog_ifindex, expected_attach_type;
};

struct lk_link_create {
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid;
};

static int empty_prog = -1;

// Places to probe: one-byte instructions, 64 for each of up to 4 threads
// (every uprobe_register takes the lock once; many per link make the
// registrations, not the link's slow release, most of the time).
#define PROBES_PER_THREAD 64
NOINLINE void probe_sites(void) {
  __asm__ volatile(".rept 256\n\tnop\n\t.endr" ::: "memory");
}

NOINLINE void register_uprobe(const struct lk_link_create *link) {
  char attr[160] = {0};
  memcpy(attr, link, sizeof(*link));
  long fd = raw_syscall3(SYS_bpf, LK_BPF_LINK_CREATE, (long)attr, sizeof(attr));
  if (fd >= 0)
    raw_syscall3(SYS_close, fd, 0, 0);
  __asm__ volatile("" ::: "memory");
}

// The file offset of `fn` in this executable, from its mapping.
static unsigned long file_offset_of(void *fn) {
  FILE *maps = fopen("/proc/self/maps", "r");
  unsigned long start, end, off, addr = (unsigned long)fn, found = 0;
  char line[512];
  while (maps && fgets(line, sizeof(line), maps))
    if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &off) == 3 &&
        addr >= start && addr < end)
      found = addr - start + off;
  if (maps)
    fclose(maps);
  return found;
}

static char exe_path[4096];

static void *registrar_thread(void *arg) {
  pthread_setname_np(pthread_self(), "registrar");
  // Probes of its own per thread (one uprobe's registrations are
  // serialized by the uprobe's own lock first).
  static __thread uint64_t offsets[PROBES_PER_THREAD];
  // probe_sites' first instructions are its frame set-up (push, mov).
  uint64_t first = file_offset_of((void *)probe_sites) + 8 +
                   (uint64_t)((long)arg % 3) * PROBES_PER_THREAD;
  for (int i = 0; i < PROBES_PER_THREAD; i++)
    offsets[i] = first + (uint64_t)i;
  struct lk_link_create link = {.prog_fd = (uint32_t)empty_prog,
                                .attach_type = LK_BPF_TRACE_UPROBE_MULTI,
                                .path = (uint64_t)(unsigned long)exe_path,
                                .offsets = (uint64_t)(unsigned long)offsets,
                                .cnt = PROBES_PER_THREAD};
  for (;;)
    register_uprobe(&link);
  return NULL;
}

static int start_uprobe(int threads, int forkers) {
  // r0 = 0; exit
  static const uint64_t insns[] = {0x00000000000000b7ull, 0x95ull};
  char attr[160] = {0};
  struct lk_prog_load load = {.prog_type = LK_BPF_PROG_TYPE_KPROBE,
                              .insn_cnt = 2,
                              .insns = (uint64_t)(unsigned long)insns,
                              .license = (uint64_t)(unsigned long)"GPL",
                              .expected_attach_type =
                                  LK_BPF_TRACE_UPROBE_MULTI};
  memcpy(attr, &load, sizeof(load));
  empty_prog = (int)syscall(SYS_bpf, LK_BPF_PROG_LOAD, attr, sizeof(attr));
  if (empty_prog < 0 ||
      readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1) <= 0) {
    fprintf(stderr, "lock_kinds: no uprobe_multi BPF program (6.6+): %s\n",
            strerror(errno));
    return 3;
  }
  uint64_t probe = file_offset_of((void *)probe_sites) + 8;
  struct lk_link_create link = {.prog_fd = (uint32_t)empty_prog,
                                .attach_type = LK_BPF_TRACE_UPROBE_MULTI,
                                .path = (uint64_t)(unsigned long)exe_path,
                                .offsets = (uint64_t)(unsigned long)&probe,
                                .cnt = 1};
  memset(attr, 0, sizeof(attr));
  memcpy(attr, &link, sizeof(link));
  long fd = syscall(SYS_bpf, LK_BPF_LINK_CREATE, attr, sizeof(attr));
  if (fd < 0) {
    fprintf(stderr, "lock_kinds: no uprobe_multi link (6.6+): %s\n",
            strerror(errno));
    return 3;
  }
  close((int)fd);
  pthread_t t;
  for (long i = 0; i < threads; i++)
    pthread_create(&t, NULL, registrar_thread, (void *)i);
  for (int i = 0; i < forkers; i++)
    pthread_create(&t, NULL, forker_thread, NULL);
  return 0;
}

// ---- pi: a PI futex ----

static uint32_t pi_word;
static long hold_us = 2000;

NOINLINE void lock_pi_word(uint32_t tid) {
  uint32_t zero = 0;
  if (__atomic_compare_exchange_n(&pi_word, &zero, tid, 0, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED))
    return;
  while (raw_syscall6(SYS_futex, (long)&pi_word, FUTEX_LOCK_PI_PRIVATE, 0, 0, 0,
                      0) != 0)
    ;
  __asm__ volatile("" ::: "memory");
}

static void unlock_pi_word(uint32_t tid) {
  uint32_t expected = tid;
  if (!__atomic_compare_exchange_n(&pi_word, &expected, 0, 0, __ATOMIC_RELEASE,
                                   __ATOMIC_RELAXED))
    raw_syscall6(SYS_futex, (long)&pi_word, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, 0,
                 0);
}

static void *pi_thread(void *arg) {
  (void)arg;
  uint32_t tid = (uint32_t)gettid();
  for (;;) {
    lock_pi_word(tid);
    sleep_us(hold_us);
    unlock_pi_word(tid);
    sleep_us(100);
  }
  return NULL;
}

// ---- readdir: a directory's i_rwsem for reading ----

static char dir_path[256];

NOINLINE void list_dir(int fd) {
  char buf[4096];
  raw_syscall3(SYS_lseek, fd, 0, SEEK_SET);
  while (raw_syscall3(SYS_getdents64, fd, (long)buf, sizeof(buf)) > 0)
    ;
  __asm__ volatile("" ::: "memory");
}

NOINLINE void make_and_remove(const char *path) {
  raw_syscall3(SYS_mkdir, (long)path, 0700, 0);
  raw_syscall3(SYS_rmdir, (long)path, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *lister_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "lister");
  int fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    perror(dir_path);
    exit(1);
  }
  for (;;)
    list_dir(fd);
  return NULL;
}

static void *maker_thread(void *arg) {
  pthread_setname_np(pthread_self(), "maker");
  char path[300];
  snprintf(path, sizeof(path), "%s/d%ld", dir_path, (long)arg);
  for (;;)
    make_and_remove(path);
  return NULL;
}

// Many entries, so that a listing holds the lock a while.
static void fill_dir(void) {
  for (int i = 0; i < 2000; i++) {
    char path[300];
    snprintf(path, sizeof(path), "%s/entry-with-a-long-name-%04d", dir_path, i);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0)
      close(fd);
  }
}

// ---- siglock: a spinlock ----

// Sets the thread's blocked signals to `mask` (rt_sigprocmask SIG_SETMASK):
// a change takes the process's sighand->siglock, shared by its threads
// (and moves shared pending signals under it).
NOINLINE void set_blocked(const uint64_t *mask) {
  raw_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)mask, 0, 8, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *siglock_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "sigmask");
  // Two masks in turn: setting the mask a thread already has takes no lock.
  static const uint64_t masks[2] = {0, 1ull << (SIGUSR2 - 1)};
  for (unsigned i = 0;; i++)
    set_blocked(&masks[i & 1]);
  return NULL;
}

// Sets SIGUSR1's action to `act` (rt_sigaction): the same siglock, taken
// through another system call.
NOINLINE void set_action(const struct sigaction *act) {
  sigaction(SIGUSR1, act, NULL);
  __asm__ volatile("" ::: "memory");
}

// The siglock reached from two system calls in runs of eight: each wait's
// kernel stack must be its own call's, whatever the one before was.
static void *sigpaths_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "sigpaths");
  static const uint64_t masks[2] = {0, 1ull << (SIGUSR2 - 1)};
  struct sigaction acts[2] = {{0}};
  acts[0].sa_handler = SIG_IGN;
  acts[1].sa_handler = SIG_DFL;
  for (unsigned i = 0;; i++) {
    if (i & 8)
      set_action(&acts[i & 1]);
    else
      set_blocked(&masks[i & 1]);
  }
  return NULL;
}

// ---- fowner: a rwlock ----

static int owned_fd = -1;

NOINLINE void set_owner(long pid) {
  raw_syscall3(SYS_fcntl, owned_fd, F_SETOWN, pid);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void get_owner(void) {
  raw_syscall3(SYS_fcntl, owned_fd, F_GETOWN, 0);
  __asm__ volatile("" ::: "memory");
}

static void *setowner_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "setowner");
  long pid = getpid();
  for (;;)
    set_owner(pid);
  return NULL;
}

static void *getowner_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "getowner");
  for (;;)
    get_owner();
  return NULL;
}

static int usage(void) {
  fprintf(
      stderr,
      "usage: lock_kinds console [THREADS] | uprobe [REGISTRARS "
      "[FORKERS]] | pi [THREADS [HOLD_US]] | readdir DIR "
      "[THREADS] | siglock [THREADS] | sigpaths [THREADS] | fowner [WRITERS "
      "[READERS]]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  const char *mode = argv[1];
  pthread_t t;
  if (!strcmp(mode, "console")) {
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    for (int i = 0; i < threads; i++) {
      char path[32];
      snprintf(path, sizeof(path), "/dev/tty%d", i + 1);
      int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) {
        fprintf(stderr, "lock_kinds: no virtual console %s: %s\n", path,
                strerror(errno));
        return 3;
      }
      pthread_create(&t, NULL, console_thread, (void *)(long)fd);
    }
  } else if (!strcmp(mode, "uprobe")) {
    int err = start_uprobe(argc > 2 ? atoi(argv[2]) : 2,
                           argc > 3 ? atoi(argv[3]) : 0);
    if (err)
      return err;
  } else if (!strcmp(mode, "pi")) {
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3)
      hold_us = atol(argv[3]);
    for (int i = 0; i < threads; i++)
      pthread_create(&t, NULL, pi_thread, NULL);
  } else if (!strcmp(mode, "readdir") && argc > 2) {
    snprintf(dir_path, sizeof(dir_path), "%s", argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    fill_dir();
    for (long i = 0; i < threads; i++) {
      pthread_create(&t, NULL, lister_thread, NULL);
      pthread_create(&t, NULL, maker_thread, (void *)i);
    }
  } else if (!strcmp(mode, "siglock")) {
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    for (int i = 0; i < threads; i++)
      pthread_create(&t, NULL, siglock_thread, NULL);
  } else if (!strcmp(mode, "sigpaths")) {
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    for (int i = 0; i < threads; i++)
      pthread_create(&t, NULL, sigpaths_thread, NULL);
  } else if (!strcmp(mode, "fowner")) {
    int writers = argc > 2 ? atoi(argv[2]) : 2;
    int readers = argc > 3 ? atoi(argv[3]) : 2;
    int fds[2];
    if (pipe(fds)) {
      perror("pipe");
      return 1;
    }
    owned_fd = fds[0];
    set_owner(getpid()); // the owner struct exists before the readers run
    for (int i = 0; i < writers; i++)
      pthread_create(&t, NULL, setowner_thread, NULL);
    for (int i = 0; i < readers; i++)
      pthread_create(&t, NULL, getowner_thread, NULL);
  } else {
    return usage();
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  pause();
  return 0;
}
