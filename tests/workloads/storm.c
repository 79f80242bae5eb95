// A storm of short-lived processes that each block once in a named
// function and exit long before tracing ends: their frames must be named
// (or the loss reported).
//   storm fork N BATCH MS   N children forked (no exec), BATCH at a time,
//                           each blocking MS ms in storm_child_block()
//   storm exec N BATCH MS   the same, each child a fresh exec of this file
// Children are named "stormchild". Prints "ready PID" first and "done"
// when every child has exited.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE void storm_child_block(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  (void)ret;
}

NOINLINE int storm_child_main(long ms) {
  prctl(PR_SET_NAME, "stormchild");
  storm_child_block(ms);
  return 0;
}

NOINLINE void wait_for_batch(int n) {
  while (n-- > 0)
    wait(NULL);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0)
    return storm_child_main(atol(argv[2]));
  if (argc != 5 || (strcmp(argv[1], "fork") && strcmp(argv[1], "exec"))) {
    fprintf(stderr, "usage: storm fork|exec N BATCH MS\n");
    return 2;
  }
  int exec_children = strcmp(argv[1], "exec") == 0;
  int n = atoi(argv[2]), batch = atoi(argv[3]);
  long ms = atol(argv[4]);
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (int started = 0; started < n;) {
    int in_batch = 0;
    for (; in_batch < batch && started < n; in_batch++, started++) {
      pid_t pid = fork();
      if (pid == 0) {
        if (exec_children) {
          execl("/proc/self/exe", argv[0], "--child", argv[4], (char *)NULL);
          _exit(127);
        }
        _exit(storm_child_main(ms));
      }
    }
    wait_for_batch(in_batch);
  }
  printf("done\n");
  fflush(stdout);
  return 0;
}
