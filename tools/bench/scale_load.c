// Load for the scaling rows of tools/bench/bench.py (compiled by it).
//   scale_load idle N    N threads blocked for good (a big host's idle
//                        threads: a tracer must not pay for them per switch)
//   scale_load paths N   one thread blocks once on each of N distinct user
//                        stacks (a binary choice of caller at each of 17
//                        levels), then the process idles: the stack maps
//                        hold N stacks while the tracer is measured
//   scale_load busy N    N threads each sleep 10 ms in a loop: many threads
//                        switching, each one's state cold in the caches
//                        when it blocks again
// Prints "ready" when the threads are blocked or the paths are walked.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define LEVELS 17
#define NOINLINE __attribute__((noinline))

static void *blocked(void *arg) {
  (void)arg;
  for (;;)
    pause();
  return NULL;
}

static volatile int sink;

static void *sleeper(void *arg) {
  (void)arg;
  struct timespec ts = {0, 10 * 1000 * 1000};
  for (;;)
    nanosleep(&ts, NULL);
  return NULL;
}

static NOINLINE void block_briefly(void) {
  struct timespec ts = {0, 1};
  nanosleep(&ts, NULL);
}

static NOINLINE void step(int level, unsigned bits);

// Two callers per level: each sequence of choices is a distinct stack.
static NOINLINE void go_left(int level, unsigned bits) {
  step(level + 1, bits);
  sink++; // keeps the call from becoming a jump
}

static NOINLINE void go_right(int level, unsigned bits) {
  step(level + 1, bits);
  sink--;
}

static NOINLINE void step(int level, unsigned bits) {
  if (level == LEVELS)
    block_briefly();
  else if ((bits >> level) & 1)
    go_left(level, bits);
  else
    go_right(level, bits);
  sink += level;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "idle") && strcmp(argv[1], "paths") &&
                    strcmp(argv[1], "busy"))) {
    fprintf(stderr, "usage: scale_load idle|paths|busy N\n");
    return 2;
  }
  long n = atol(argv[2]);
  bool busy = strcmp(argv[1], "busy") == 0;
  if (busy || strcmp(argv[1], "idle") == 0) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, &attr, busy ? sleeper : blocked, NULL)) {
        fprintf(stderr, "scale_load: thread %ld: cannot create\n", i);
        return 1;
      }
    }
  } else {
    prctl(PR_SET_TIMERSLACK, 1UL);
    if (n > (1L << LEVELS))
      n = 1L << LEVELS;
    for (long i = 0; i < n; i++)
      step(0, (unsigned)i);
  }
  printf("ready\n");
  fflush(stdout);
  for (;;)
    pause();
}
