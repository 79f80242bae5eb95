// A program that maps two libraries of its own, both built without frame
// pointers: it naps in one (deferred_lib.c) for argv[1] naps of 5 ms and
// never calls the other (nofp_lib.c, linked but unused). A whole-system run
// builds the first's table once a walk reaches it and never the second's
// (tests/integration/deferred_tables_test.cpp). With argv[2] = N it first
// forks N children (no exec) that nap alike, as a pre-fork server's
// workers do, and prints their pids after "ready".
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

void dt_lib_loop(int naps);
void nf_lib_block(int fd);

// Referenced, so that the linker keeps the library, never called.
void (*volatile dt_unused)(int) = nf_lib_block;

int main(int argc, char **argv) {
  int naps = argc > 1 ? atoi(argv[1]) : 400;
  int children = argc > 2 ? atoi(argv[2]) : 0;
  char line[4096] = "ready";
  size_t used = 5;
  for (int i = 0; i < children; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL); // not left behind by a killed test
      dt_lib_loop(naps);
      _exit(0);
    }
    if (pid > 0 && used < sizeof(line) - 16)
      used +=
          (size_t)snprintf(line + used, sizeof(line) - used, " %d", (int)pid);
  }
  printf("%s\n", line);
  fflush(stdout);
  dt_lib_loop(naps);
  return 0;
}
