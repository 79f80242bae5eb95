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
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv) {
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
