// A process whose threads block in named functions, for offcpu's
// integration tests. Built with frame pointers. Blocking system calls are
// made with inline `syscall` from the named functions themselves, so the
// user stack is exact: glibc has no frame pointers, and a walk through a
// glibc function loses that function's caller.
//
// Threads (named with pthread_setname_np so tests can find them by comm):
//   sleeper  nanosleep(20 ms) in a loop            block_in_nanosleep
//   piperd   read() on a pipe fed every 200 ms     block_in_pipe_read
//   pipewr   sleeps 200 ms, writes one byte
//   mutexh   holds a mutex for 100 ms at a time, sleeping
//   mutexw   waits for that mutex                  wait_for_contended_mutex
//   spinner  never blocks                          spin_on_cpu
//   stuck    read() on a pipe nobody writes        block_forever_in_read
// Prints "ready PID" once all threads run, then runs until killed.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static long raw_syscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
  return ret;
}

static int pipe_fds[2];
static int stuck_fds[2];
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;

NOINLINE void block_in_nanosleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void block_in_pipe_read(void) {
  char c;
  raw_syscall3(SYS_read, pipe_fds[0], (long)&c, 1);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void block_forever_in_read(void) {
  char c;
  raw_syscall3(SYS_read, stuck_fds[0], (long)&c, 1);
  __asm__ volatile("" ::: "memory");
}

// glibc's lock path has no frame pointers: the walk keeps this function
// (the caller of the noinline helper) but loses the helper.
NOINLINE void take_lock(pthread_mutex_t *m) {
  pthread_mutex_lock(m);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void wait_for_contended_mutex(void) {
  take_lock(&contended);
  pthread_mutex_unlock(&contended);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void spin_on_cpu(void) {
  for (unsigned long i = 0; i < 100000000UL; i++)
    sink += i;
}

static void *sleeper_main(void *arg) {
  (void)arg;
  for (;;)
    block_in_nanosleep(20);
  return NULL;
}

static void *pipe_reader_main(void *arg) {
  (void)arg;
  for (;;)
    block_in_pipe_read();
  return NULL;
}

static void *pipe_writer_main(void *arg) {
  (void)arg;
  for (;;) {
    block_in_nanosleep(200);
    raw_syscall3(SYS_write, pipe_fds[1], (long)"x", 1);
  }
  return NULL;
}

static void *mutex_holder_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&contended);
    block_in_nanosleep(100);
    pthread_mutex_unlock(&contended);
    block_in_nanosleep(10);
  }
  return NULL;
}

static void *mutex_waiter_main(void *arg) {
  (void)arg;
  for (;;) {
    wait_for_contended_mutex();
    block_in_nanosleep(10);
  }
  return NULL;
}

static void *spinner_main(void *arg) {
  (void)arg;
  for (;;)
    spin_on_cpu();
  return NULL;
}

static void *stuck_main(void *arg) {
  (void)arg;
  block_forever_in_read();
  return NULL;
}

struct thread_def {
  const char *name;
  void *(*fn)(void *);
};

int main(int argc, char **argv) {
  int with_spinner = !(argc > 1 && strcmp(argv[1], "--no-spinner") == 0);
  if (pipe(pipe_fds) || pipe(stuck_fds)) {
    perror("pipe");
    return 1;
  }
  const struct thread_def defs[] = {
      {"sleeper", sleeper_main},     {"piperd", pipe_reader_main},
      {"pipewr", pipe_writer_main},  {"mutexh", mutex_holder_main},
      {"mutexw", mutex_waiter_main}, {"stuck", stuck_main},
      {"spinner", spinner_main},
  };
  size_t n = sizeof(defs) / sizeof(defs[0]) - (with_spinner ? 0 : 1);
  for (size_t i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, defs[i].fn, NULL)) {
      perror("pthread_create");
      return 1;
    }
    pthread_setname_np(t, defs[i].name);
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    pause();
}
