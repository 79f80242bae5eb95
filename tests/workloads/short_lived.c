// Many processes that each block briefly in a named function and exit long
// before tracing ends: their user frames must still be named.
//   short_lived N      runs N children, 10 at a time, then prints "done"
//   short_lived --child
// Each child is a fresh exec (its own address space layout), named
// "slchild", and sleeps 40 ms in block_briefly() with an inline syscall.
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

NOINLINE void block_briefly(void) {
  struct timespec ts = {0, 40 * 1000000L};
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  (void)ret;
}

NOINLINE int child_main(void) {
  prctl(PR_SET_NAME, "slchild");
  block_briefly();
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    return child_main();
  int n = argc > 1 ? atoi(argv[1]) : 300;
  for (int started = 0; started < n;) {
    int batch = 0;
    for (; batch < 10 && started < n; batch++, started++) {
      pid_t pid = fork();
      if (pid == 0) {
        execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
        _exit(127);
      }
    }
    while (batch-- > 0)
      wait(NULL);
  }
  printf("done\n");
  return 0;
}
