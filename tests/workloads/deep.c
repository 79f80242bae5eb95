// A thread that blocks at the bottom of a deep recursion, for the tests of
// stacks cut at the depth limit (tests/integration/deep_stack_test.cpp).
// Built with frame pointers and without inlining or tail calls, so each
// level is one frame: the stack is deep_block, DEPTH x descend, main...
//
// Usage: deep [DEPTH] (default 10000). Prints "ready PID" once at the
// bottom, then sleeps there in 20 ms steps until killed.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

// The system call inline, from the named function: glibc has no frame
// pointers, and a walk through its nanosleep would lose deep_block.
static inline __attribute__((always_inline)) long
raw_nanosleep(const struct timespec *ts) {
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(ts), "S"(0)
                   : "rcx", "r11", "memory");
  return ret;
}

NOINLINE void deep_block(void) {
  printf("ready %d\n", getpid());
  fflush(stdout);
  struct timespec ts = {0, 20 * 1000000L};
  for (;;)
    raw_nanosleep(&ts);
}

// The work after the call keeps it from being a tail call (one frame per
// level, each with its own return address).
NOINLINE int descend(int n) {
  if (n <= 1)
    deep_block();
  else
    descend(n - 1);
  __asm__ volatile("" ::: "memory");
  return n;
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 10000;
  if (depth < 1 || depth > 100000) {
    fprintf(stderr, "usage: deep [DEPTH 1..100000]\n");
    return 2;
  }
  return descend(depth) == depth ? 0 : 1;
}
