// Threads contending one global pthread mutex, for offcpu lock --futex's
// integration tests. Each worker (named "fc_worker") takes the lock in
// take_big_lock, holds it for HOLD_US in hold_big_lock (asleep, so the
// others wait off CPU), lets go and sleeps a little outside it.
//   futex_contend mutex [THREADS] [HOLD_US]  big_lock, a default mutex
//   futex_contend pi [THREADS] [HOLD_US]     pi_lock, PTHREAD_PRIO_INHERIT
//                                            (FUTEX_LOCK_PI)
// Prints "ready PID ADDR" (ADDR: the futex word, the mutex's address), then
// every 20 ms "W NOW WAITED": CLOCK_MONOTONIC ns and the ns all workers
// have spent in contended lock calls so far (a trylock failed first), its
// own measure of the wait to compare with. Runs until killed.
//   futex_contend handoff ROUNDS HOLD_US exit|idle LINGER_MS
// A waiter thread ("fc_waiter") sleeps in FUTEX_WAIT on handoff_word, in
// handoff_wait, exactly ROUNDS times: the main thread wakes it each time
// HOLD_US after seeing it asleep there. Then the waiter exits (exit) or
// sleeps in pause() (idle); the process exits LINGER_MS later.
//   futex_contend timeout ROUNDS TIMEOUT_US
// The main thread sleeps ROUNDS times in FUTEX_WAIT on timeout_word, in
// timeout_wait, each wait ended by its timeout: nobody wakes it. Two
// threads ("fc_spinner") spin in user mode meanwhile, so the timer's
// interrupt finds one of them running. Prints "timed out ROUNDS", exits.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t pi_lock;

static pthread_mutex_t *lock_used = &big_lock;
static long hold_us = 2000;
static uint64_t waited_ns; // atomic

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

NOINLINE void hold_big_lock(void) {
  sleep_us(hold_us);
  __asm__ volatile("" ::: "memory");
}

// The lock, and the time the call took when the lock was taken.
NOINLINE void take_big_lock(void) {
  if (pthread_mutex_trylock(lock_used) == 0)
    return;
  uint64_t t0 = now_ns();
  pthread_mutex_lock(lock_used);
  __atomic_fetch_add(&waited_ns, now_ns() - t0, __ATOMIC_RELAXED);
  __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "fc_worker");
  for (;;) {
    take_big_lock();
    hold_big_lock();
    pthread_mutex_unlock(lock_used);
    sleep_us(hold_us / 4);
  }
  return NULL;
}

int handoff_word; // the round the waiter waits out
static int waiter_tid, waiter_idles;

NOINLINE void handoff_wait(int round) {
  while (__atomic_load_n(&handoff_word, __ATOMIC_ACQUIRE) == round)
    syscall(SYS_futex, &handoff_word, FUTEX_WAIT_PRIVATE, round, NULL, NULL, 0);
}

static void *handoff_waiter(void *arg) {
  int rounds = *(int *)arg;
  pthread_setname_np(pthread_self(), "fc_waiter");
  __atomic_store_n(&waiter_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
  for (int i = 0; i < rounds; i++)
    handoff_wait(i);
  while (waiter_idles)
    pause();
  return NULL;
}

int timeout_word; // never woken: each wait on it times out
static int spinning = 1;

NOINLINE void timeout_wait(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  syscall(SYS_futex, &timeout_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}

static void *spinner(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "fc_spinner");
  while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
    __asm__ volatile("" ::: "memory");
  return NULL;
}

static int timeouts(int argc, char **argv) {
  int rounds = argc > 2 ? atoi(argv[2]) : 0;
  long us = argc > 3 ? atol(argv[3]) : 0;
  if (rounds < 1 || us < 1) {
    fprintf(stderr, "usage: futex_contend timeout ROUNDS TIMEOUT_US\n");
    return 2;
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, spinner, NULL) != 0)
      return 1;
  for (int i = 0; i < rounds; i++)
    timeout_wait(us);
  __atomic_store_n(&spinning, 0, __ATOMIC_RELAXED);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  printf("timed out %d\n", rounds);
  fflush(stdout);
  return 0;
}

// Whether thread `tid` is blocked in a futex call (its syscall file names
// the call only while it is blocked in one).
static int asleep_in_futex(int tid) {
  char path[64], buf[64] = "";
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  return atoi(buf) == SYS_futex && buf[0] != 'r';
}

static int handoff(int argc, char **argv) {
  int rounds = argc > 2 ? atoi(argv[2]) : 0;
  long hold = argc > 3 ? atol(argv[3]) : 0;
  waiter_idles = argc > 4 && !strcmp(argv[4], "idle");
  long linger_ms = argc > 5 ? atol(argv[5]) : 0;
  if (rounds < 1 || hold < 1 || argc < 5 ||
      (strcmp(argv[4], "idle") && strcmp(argv[4], "exit"))) {
    fprintf(stderr, "usage: futex_contend handoff ROUNDS HOLD_US exit|idle "
                    "LINGER_MS\n");
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, handoff_waiter, &rounds) != 0)
    return 1;
  while (!__atomic_load_n(&waiter_tid, __ATOMIC_ACQUIRE))
    sleep_us(100);
  for (int i = 0; i < rounds; i++) {
    while (!asleep_in_futex(waiter_tid))
      sleep_us(100);
    sleep_us(hold);
    __atomic_store_n(&handoff_word, i + 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &handoff_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
  if (!waiter_idles)
    pthread_join(t, NULL);
  printf("handed off %d\n", rounds);
  fflush(stdout);
  sleep_us(linger_ms * 1000);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "handoff"))
    return handoff(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "timeout"))
    return timeouts(argc, argv);
  if (argc < 2 || (strcmp(argv[1], "mutex") && strcmp(argv[1], "pi"))) {
    fprintf(stderr, "usage: futex_contend mutex|pi [THREADS] [HOLD_US]\n");
    return 2;
  }
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  if (argc > 3)
    hold_us = atol(argv[3]);
  if (threads < 2 || threads > 64 || hold_us < 1) {
    fprintf(stderr, "futex_contend: 2-64 threads, HOLD_US >= 1\n");
    return 2;
  }
  if (!strcmp(argv[1], "pi")) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&pi_lock, &a);
    lock_used = &pi_lock;
  }
  for (int i = 0; i < threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
      return 1;
  }
  printf("ready %d %p\n", getpid(), (void *)lock_used);
  fflush(stdout);
  for (;;) {
    sleep_us(20000);
    printf("W %llu %llu\n", (unsigned long long)now_ns(),
           (unsigned long long)__atomic_load_n(&waited_ns, __ATOMIC_RELAXED));
    fflush(stdout);
  }
}
