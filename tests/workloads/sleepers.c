// Threads that sleep in a loop, for the tests that check every wait is
// counted and that the window keeps its length on a saturated host.
//   sleepers truth N MS      N threads (comm "slpNN") sleep MS ms in a loop
//                            in sleep_and_log(), logging each wait's start
//                            and end (CLOCK_MONOTONIC, the clock of
//                            bpf_ktime_get_ns). On SIGUSR1 the main thread
//                            prints "TID COMM START END" per finished wait,
//                            then "end", and exits.
//   sleepers saturate N MS   N threads sleep MS ms in a loop, no logging.
//   sleepers churn N MS K    N slots, each running one thread at a time
//                            (comm "chNN"): it sleeps MS ms K times, in
//                            turn in three functions (three stacks), logs
//                            each wait as in truth, and exits; the slot
//                            starts the next. SIGUSR1 as in truth.
// Prints "ready PID" once every thread runs.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
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
  pid_t tid;
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
static int churn_waits; // churn: waits per thread
static atomic_int started;

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void log_wait(struct sleeper *s, unsigned long long start) {
  int n = atomic_load_explicit(&s->count, memory_order_relaxed);
  if (s->log && n < MAX_WAITS) {
    s->log[n] = (struct wait_log){start, now_ns(), s->tid};
    atomic_store_explicit(&s->count, n + 1, memory_order_release);
  }
}

// The system call is made inline, so the user stack is exact; a macro, so
// that each function below has its own call site.
#define SLEEP_AND_LOG(s)                                                       \
  do {                                                                         \
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};      \
    unsigned long long start = now_ns();                                       \
    long ret;                                                                  \
    __asm__ volatile("syscall"                                                 \
                     : "=a"(ret)                                               \
                     : "a"(SYS_nanosleep), "D"(&ts), "S"(0)                    \
                     : "rcx", "r11", "memory");                                \
    (void)ret;                                                                 \
    log_wait(s, start);                                                        \
  } while (0)

NOINLINE void sleep_and_log(struct sleeper *s) {
  SLEEP_AND_LOG(s);
}
NOINLINE void churn_sleep_a(struct sleeper *s) {
  SLEEP_AND_LOG(s);
}
NOINLINE void churn_sleep_b(struct sleeper *s) {
  SLEEP_AND_LOG(s);
}
NOINLINE void churn_sleep_c(struct sleeper *s) {
  SLEEP_AND_LOG(s);
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

// One short-lived thread of a churn slot.
static void *churn_worker(void *arg) {
  struct sleeper *s = arg;
  s->tid = (pid_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), s->comm);
  for (int k = 0; k < churn_waits; k++) {
    switch (k % 3) {
    case 0:
      churn_sleep_a(s);
      break;
    case 1:
      churn_sleep_b(s);
      break;
    default:
      churn_sleep_c(s);
    }
  }
  return NULL;
}

// A churn slot: one worker at a time, for ever.
static void *churn_slot(void *arg) {
  struct sleeper *s = arg;
  snprintf(s->comm, sizeof(s->comm), "ch%02d", s->index % 100);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  atomic_fetch_add(&started, 1);
  for (;;) {
    pthread_t t;
    if (pthread_create(&t, &attr, churn_worker, s)) {
      perror("pthread_create");
      exit(1);
    }
    pthread_join(t, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bool churn = argc == 5 && strcmp(argv[1], "churn") == 0;
  if (!churn && (argc != 4 ||
                 (strcmp(argv[1], "truth") && strcmp(argv[1], "saturate")))) {
    fprintf(stderr, "usage: sleepers truth|saturate N MS | churn N MS K\n");
    return 2;
  }
  logging = strcmp(argv[1], "saturate") != 0;
  int n = atoi(argv[2]);
  sleep_ms = atol(argv[3]);
  churn_waits = churn ? atoi(argv[4]) : 0;
  if (n < 1 || n > MAX_THREADS || sleep_ms < 1 || (churn && churn_waits < 1))
    return 2;
  // SIGUSR1 blocked in every thread (they inherit the mask) and taken by
  // the main thread with sigwait: a handler could run on any thread and
  // leave the main one in pause() for ever (a test once waited 20 s for
  // the log, in CI).
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 0; i < n; i++) {
    sleepers[i].index = i;
    if (logging)
      sleepers[i].log = calloc(MAX_WAITS, sizeof(struct wait_log));
    pthread_t t;
    if (pthread_create(&t, &attr, churn ? churn_slot : sleeper_main,
                       &sleepers[i])) {
      perror("pthread_create");
      return 1;
    }
  }
  while (atomic_load(&started) < n)
    usleep(1000);
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (int sig = 0; sig != SIGUSR1;)
    if (sigwait(&usr1, &sig) != 0)
      return 1;
  for (int i = 0; i < n; i++) {
    int count = atomic_load_explicit(&sleepers[i].count, memory_order_acquire);
    for (int k = 0; k < count; k++)
      printf("%d %s %llu %llu\n", sleepers[i].log[k].tid, sleepers[i].comm,
             sleepers[i].log[k].start, sleepers[i].log[k].end);
  }
  printf("end\n");
  fflush(stdout);
  _exit(0);
}
