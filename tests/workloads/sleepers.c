// Threads that sleep in a loop, for the tests that check every wait is
// counted and that the window keeps its length on a saturated host.
//   sleepers truth N MS      N threads (comm "slpNN") sleep MS ms in a loop
//                            in sleep_and_log(), logging each wait's start
//                            and end (CLOCK_MONOTONIC, the clock of
//                            bpf_ktime_get_ns). On SIGUSR1 the main thread
//                            prints "TID COMM START END" per finished wait,
//                            then "end", and exits.
//   sleepers saturate N MS   N threads sleep MS ms in a loop, no logging.
// Prints "ready PID" once every thread runs.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAX_THREADS 4096
#define MAX_WAITS 8192

struct wait_log {
  unsigned long long start, end;
};

struct sleeper {
  int index;
  pid_t tid;
  char comm[16];
  struct wait_log *log;
  atomic_int count;
};

static struct sleeper sleepers[MAX_THREADS];
static long sleep_ms;
static int logging;
static atomic_int started;
static volatile sig_atomic_t dump;

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

// The system call is made here, inline, so the user stack is exact.
NOINLINE void sleep_and_log(struct sleeper *s) {
  struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  unsigned long long start = now_ns();
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  (void)ret;
  int n = atomic_load_explicit(&s->count, memory_order_relaxed);
  if (s->log && n < MAX_WAITS) {
    s->log[n] = (struct wait_log){start, now_ns()};
    atomic_store_explicit(&s->count, n + 1, memory_order_release);
  }
}

static void *sleeper_main(void *arg) {
  struct sleeper *s = arg;
  s->tid = (pid_t)syscall(SYS_gettid);
  snprintf(s->comm, sizeof(s->comm), "slp%02d", s->index % 100);
  pthread_setname_np(pthread_self(), s->comm);
  atomic_fetch_add(&started, 1);
  for (;;)
    sleep_and_log(s);
  return NULL;
}

static void on_usr1(int sig) {
  (void)sig;
  dump = 1;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "truth") && strcmp(argv[1], "saturate"))) {
    fprintf(stderr, "usage: sleepers truth|saturate N MS\n");
    return 2;
  }
  logging = strcmp(argv[1], "truth") == 0;
  int n = atoi(argv[2]);
  sleep_ms = atol(argv[3]);
  if (n < 1 || n > MAX_THREADS || sleep_ms < 1)
    return 2;
  signal(SIGUSR1, on_usr1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 0; i < n; i++) {
    sleepers[i].index = i;
    if (logging)
      sleepers[i].log = calloc(MAX_WAITS, sizeof(struct wait_log));
    pthread_t t;
    if (pthread_create(&t, &attr, sleeper_main, &sleepers[i])) {
      perror("pthread_create");
      return 1;
    }
  }
  while (atomic_load(&started) < n)
    usleep(1000);
  printf("ready %d\n", getpid());
  fflush(stdout);
  while (!dump)
    pause();
  for (int i = 0; i < n; i++) {
    int count = atomic_load_explicit(&sleepers[i].count, memory_order_acquire);
    for (int k = 0; k < count; k++)
      printf("%d %s %llu %llu\n", sleepers[i].tid, sleepers[i].comm,
             sleepers[i].log[k].start, sleepers[i].log[k].end);
  }
  printf("end\n");
  fflush(stdout);
  _exit(0);
}
