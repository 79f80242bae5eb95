// Threads that block at the same place over and over, for the tests of
// user stack reuse (bpf/user_unwind.bpf.h). Built without frame pointers,
// so the stacks are walked with unwind tables. Threads:
//   alt     sleeps 1 ms at a time, alternately through outer_left() and
//           outer_right(): the two reach the sleep through the same chain
//           of frames with the same registers; only the return address of
//           the outermost differs. A reused stack must never take one for
//           the other: each gets half of the time.
//   ping    and pong hand a byte back and forth through two pipes: a
//   pong    thousand waits a second on one stack each.
// Prints "ready PID" once the threads run.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

static int ping_pipe[2], pong_pipe[2];

NOINLINE void reuse_tick(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
  KEEP();
}

NOINLINE void reuse_chain3(void) {
  reuse_tick();
  KEEP();
}

NOINLINE void reuse_chain2(void) {
  reuse_chain3();
  KEEP();
}

NOINLINE void reuse_chain1(void) {
  reuse_chain2();
  KEEP();
}

NOINLINE void outer_left(void) {
  reuse_chain1();
  KEEP();
}

NOINLINE void outer_right(void) {
  reuse_chain1();
  KEEP();
}

NOINLINE void *alt_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "alt");
  for (unsigned i = 0;; i++) {
    if (i & 1)
      outer_left();
    else
      outer_right();
  }
  return NULL;
}

NOINLINE void ping_once(void) {
  char c = 'x';
  if (write(ping_pipe[1], &c, 1) != 1 || read(pong_pipe[0], &c, 1) != 1)
    _exit(1);
  KEEP();
}

NOINLINE void *ping_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "ping");
  for (;;)
    ping_once();
  return NULL;
}

NOINLINE void pong_once(void) {
  char c;
  if (read(ping_pipe[0], &c, 1) != 1 || write(pong_pipe[1], &c, 1) != 1)
    _exit(1);
  KEEP();
}

NOINLINE void *pong_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "pong");
  for (;;) {
    pong_once();
    // A thousand round trips a second, not a busy CPU.
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

int main(void) {
  if (pipe(ping_pipe) || pipe(pong_pipe))
    return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, alt_main, NULL) ||
      pthread_create(&t, NULL, ping_main, NULL) ||
      pthread_create(&t, NULL, pong_main, NULL))
    return 1;
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    pause();
}
