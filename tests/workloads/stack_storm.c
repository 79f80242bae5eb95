// Stack storage and per-thread state under a busy host's load, for
// tests/integration/storage_test.cpp.
//   stack_storm stacks HOLDERS STORMERS
//       HOLDERS threads (comm "holdNN") block for good in read() of a pipe
//       nobody writes, under hold_deep() called 4 + NN times: one distinct
//       stack each, blocked before any tracing starts. STORMERS threads
//       (comm "stormNN") sleep 20 us again and again, each time under a
//       different path of 16 calls through go_left()/go_right(): 65,536
//       distinct user stacks.
//   stack_storm churn SLOTS
//       Short threads (comm "churn"), SLOTS at a time: each sleeps 50 us
//       once and exits, and its slot starts the next.
//   stack_storm steady N
//       N threads (comm "steadyNN") that block for good in read(), as the
//       holders (the other processes of a churning host).
// Prints "ready PID" once every thread runs.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAX_THREADS 256
#define STORM_DEPTH 16

static int never_written[2];
static atomic_int blocked;
// Written after each call, so that no call is made a tail call (a jump
// that would leave its caller's frame out of the stack).
static volatile int sink;

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static NOINLINE void block_forever(void) {
  char c;
  atomic_fetch_add(&blocked, 1);
  while (read(never_written[0], &c, 1) != 0)
    ;
}

static NOINLINE void hold_deep(int depth) {
  if (depth <= 1)
    block_forever();
  else
    hold_deep(depth - 1);
  sink++;
}

static void *holder(void *arg) {
  int i = (int)(long)arg;
  char name[16];
  snprintf(name, sizeof(name), "hold%02d", i);
  pthread_setname_np(pthread_self(), name);
  hold_deep(4 + i);
  return NULL;
}

static void *steady(void *arg) {
  int i = (int)(long)arg;
  char name[16];
  snprintf(name, sizeof(name), "steady%02d", i);
  pthread_setname_np(pthread_self(), name);
  block_forever();
  return NULL;
}

static NOINLINE void storm_step(unsigned path, int depth);

static NOINLINE void go_left(unsigned path, int depth) {
  storm_step(path, depth - 1);
  sink++;
}

static NOINLINE void go_right(unsigned path, int depth) {
  storm_step(path, depth - 1);
  sink++;
}

// Bit depth-1 of `path` picks the next call: every path its own stack.
static NOINLINE void storm_step(unsigned path, int depth) {
  if (depth == 0)
    sleep_us(20);
  else if ((path >> (depth - 1)) & 1)
    go_right(path, depth);
  else
    go_left(path, depth);
  sink++;
}

static void *stormer(void *arg) {
  int i = (int)(long)arg;
  char name[16];
  snprintf(name, sizeof(name), "storm%02d", i);
  pthread_setname_np(pthread_self(), name);
  atomic_fetch_add(&blocked, 1);
  for (unsigned path = (unsigned)i * 7919u;; path++)
    storm_step(path & 0xffff, STORM_DEPTH);
  return NULL;
}

static void *churner(void *arg) {
  (void)arg;
  sleep_us(50);
  return NULL;
}

static void start(void *(*fn)(void *), long i) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, (void *)i) != 0) {
    perror("pthread_create");
    exit(1);
  }
  pthread_detach(t);
}

static void wait_blocked(int n) {
  while (atomic_load(&blocked) < n)
    sleep_us(1000);
  sleep_us(100000); // into read() for good
}

static void churn(int slots) {
  pthread_t t[MAX_THREADS];
  pthread_setname_np(pthread_self(), "churn");
  for (int i = 0; i < slots; i++)
    pthread_create(&t[i], NULL, churner, NULL);
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (unsigned long n = 0;; n++) {
    int s = (int)(n % (unsigned long)slots);
    pthread_join(t[s], NULL);
    if (pthread_create(&t[s], NULL, churner, NULL) != 0) {
      perror("pthread_create");
      exit(1);
    }
  }
}

int main(int argc, char **argv) {
  if (pipe(never_written) != 0)
    return 1;
  if (argc == 4 && strcmp(argv[1], "stacks") == 0) {
    int holders = atoi(argv[2]), stormers = atoi(argv[3]);
    if (holders < 0 || stormers < 0 || holders + stormers > MAX_THREADS)
      return 2;
    for (long i = 0; i < holders; i++)
      start(holder, i);
    for (long i = 0; i < stormers; i++)
      start(stormer, i);
    wait_blocked(holders + stormers);
  } else if (argc == 3 && strcmp(argv[1], "steady") == 0) {
    int n = atoi(argv[2]);
    if (n <= 0 || n > MAX_THREADS)
      return 2;
    for (long i = 0; i < n; i++)
      start(steady, i);
    wait_blocked(n);
  } else if (argc == 3 && strcmp(argv[1], "churn") == 0) {
    int slots = atoi(argv[2]);
    if (slots <= 0 || slots > MAX_THREADS)
      return 2;
    churn(slots);
  } else {
    fprintf(stderr, "usage: stack_storm stacks HOLDERS STORMERS | churn SLOTS "
                    "| steady N\n");
    return 2;
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    pause();
}
