// A process the usability tests know the stacks of (tests/integration/
// usability_test.cpp):
//   usability sites   the main thread sleeps in wait_twice(), from two call
//                     sites of nanosleep: two user stacks that print alike.
//                     A thread "helper" sleeps in helper_wait().
// Prints "ready PID HELPER_TID".
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static void nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

// Two calls, two return addresses: the raw stacks differ, their names
// (nap, wait_twice, main) do not.
NOINLINE void wait_twice(void) {
  for (;;) {
    nap(2000000);
    __asm__ volatile("" ::: "memory");
    nap(3000000);
    __asm__ volatile("" ::: "memory");
  }
}

NOINLINE void helper_wait(void) {
  for (;;)
    nap(5000000);
}

static volatile pid_t helper_tid;

static void *helper(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "helper");
  helper_tid = (pid_t)syscall(SYS_gettid);
  helper_wait();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[1], "sites") != 0) {
    fprintf(stderr, "usage: usability sites\n");
    return 2;
  }
  pthread_t t;
  pthread_create(&t, NULL, helper, NULL);
  while (!helper_tid)
    usleep(1000);
  printf("ready %d %d\n", getpid(), (int)helper_tid);
  fflush(stdout);
  wait_twice();
  return 0;
}
