// Many processes that each block briefly in a named function and exit long
// before tracing ends: their user frames must still be named.
//   short_lived N [LIB]  runs N children, 10 at a time, then prints "done"
//   short_lived --child [LIB]
// Each child is a fresh exec (its own address space layout), named
// "slchild", and sleeps 40 ms in block_briefly() with an inline syscall;
// given LIB (late_lib.c's), it then loads it with dlopen() and sleeps 20 ms
// more in its late_lib_nap(), code mapped after its first wait.
#define _GNU_SOURCE
#include <dlfcn.h>
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

NOINLINE int child_main(const char *lib) {
  prctl(PR_SET_NAME, "slchild");
  block_briefly();
  if (lib) {
    void *h = dlopen(lib, RTLD_NOW);
    void (*nap)(void) = h ? (void (*)(void))dlsym(h, "late_lib_nap") : NULL;
    if (!nap) {
      fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
      return 1;
    }
    nap();
  }
  __asm__ volatile("" ::: "memory"); // no tail call: child_main stays
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    return child_main(argc > 2 ? argv[2] : NULL);
  int n = argc > 1 ? atoi(argv[1]) : 300;
  const char *lib = argc > 2 ? argv[2] : NULL;
  for (int started = 0; started < n;) {
    int batch = 0;
    for (; batch < 10 && started < n; batch++, started++) {
      pid_t pid = fork();
      if (pid == 0) {
        execl("/proc/self/exe", argv[0], "--child", lib, (char *)NULL);
        _exit(127);
      }
    }
    while (batch-- > 0)
      wait(NULL);
  }
  printf("done\n");
  return 0;
}
