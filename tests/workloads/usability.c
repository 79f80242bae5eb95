// A process the usability tests know the stacks of (tests/integration/
// usability_test.cpp):
//   usability sites   the main thread sleeps in wait_twice(), from two call
//                     sites of nanosleep: two user stacks that print alike.
//                     A thread "helper" sleeps in helper_wait().
// Prints "ready PID HELPER_TID".
//   usability execfn PATH
//                     the same, but first writes PATH over the string the
//                     kernel handed it as execve's filename (AT_EXECFN), as
//                     a hostile process may; prints "ready PID".
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
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
  const int sites = argc == 2 && strcmp(argv[1], "sites") == 0;
  const int execfn = argc == 3 && strcmp(argv[1], "execfn") == 0;
  if (!sites && !execfn) {
    fprintf(stderr, "usage: usability sites | usability execfn PATH\n");
    return 2;
  }
  if (execfn) {
    char *run = (char *)getauxval(AT_EXECFN);
    if (!run || strlen(argv[2]) > strlen(run)) {
      fprintf(stderr, "run me by a path at least as long as %s\n", argv[2]);
      return 2;
    }
    strcpy(run, argv[2]);
  }
  pthread_t t;
  pthread_create(&t, NULL, helper, NULL);
  while (!helper_tid)
    usleep(1000);
  if (execfn)
    printf("ready %d\n", getpid());
  else
    printf("ready %d %d\n", getpid(), (int)helper_tid);
  fflush(stdout);
  wait_twice();
  return 0;
}
