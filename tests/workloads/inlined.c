// Threads blocked at the bottom of chains of always_inline functions, for
// comparing offcpu's inlined frames and source lines with gdb's backtrace
// (tests/integration/inline_truth_test.cpp). Built -O2 -g: the chains are
// real inlining, and glibc's own inlined functions (libc6-dbg) sit below.
// Prints "ready PID" once every thread is blocked; runs until killed.
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define INLINE static inline __attribute__((always_inline))
#define OUTLINE __attribute__((noinline))

static int never_written[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
static volatile int sink;

INLINE void poll_forever(void) {
  struct pollfd p = {never_written[0], POLLIN, 0};
  sink += poll(&p, 1, -1);
}
INLINE void poll_middle(void) {
  poll_forever();
  sink++;
}
INLINE void poll_outer(void) {
  poll_middle();
  sink++;
}

OUTLINE static void poll_loop(void) {
  for (;;)
    poll_outer();
}

INLINE void sleep_a_while(void) {
  struct timespec ts = {1000, 0};
  sink += nanosleep(&ts, NULL);
}
INLINE void sleep_outer(void) {
  sleep_a_while();
  sink++;
}

OUTLINE static void sleep_inner_loop(void) {
  for (;;)
    sleep_outer();
}
OUTLINE static void sleep_loop(void) {
  sleep_inner_loop();
  sink++;
}

INLINE void cond_wait_forever(void) {
  pthread_mutex_lock(&lock);
  for (;;)
    pthread_cond_wait(&never_signalled, &lock);
}
INLINE void cond_middle(void) {
  cond_wait_forever();
  sink++;
}
INLINE void cond_outer(void) {
  cond_middle();
  sink++;
}

OUTLINE static void cond_loop(void) {
  cond_outer();
}

INLINE void read_forever(void) {
  char c;
  for (;;)
    sink += (int)read(never_written[0], &c, 1);
}
INLINE void read_outer(void) {
  read_forever();
  sink++;
}

OUTLINE static void read_loop(void) {
  read_outer();
}

static void *thread_main(void *arg) {
  const char *name = arg;
  pthread_setname_np(pthread_self(), name);
  switch (name[3]) {
  case 'p':
    poll_loop();
    break;
  case 's':
    sleep_loop();
    break;
  case 'c':
    cond_loop();
    break;
  default:
    read_loop();
  }
  return NULL;
}

int main(void) {
  if (pipe(never_written) != 0)
    return 1;
  static const char *names[] = {"in_poll", "in_sleep", "in_cond", "in_read"};
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, thread_main, (void *)names[i]) != 0)
      return 1;
  usleep(200000);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  pthread_join(t[0], NULL);
  return 0;
}
