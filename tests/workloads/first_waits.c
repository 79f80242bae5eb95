// Sleeps 1 ms at a time in fw_nap() from its first instruction, built
// without frame pointers (tests/integration/first_waits_test.cpp): a walk
// by frame pointers alone cannot get from the sleep up to main, so only
// waits walked with the unwind tables name fw_nap and main.
//   first_waits N [K]   N naps, then exit (0: until killed); with K > 0,
//                       first two naps and an exec of itself with K - 1,
//                       K times over: each exec maps the same files anew
//                       while offcpu reads the process's mappings
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

NOINLINE void fw_nap(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
  KEEP();
}

NOINLINE void fw_loop(long n) {
  for (long i = 0; n <= 0 || i < n; i++)
    fw_nap();
  KEEP();
}

int main(int argc, char **argv) {
  const long execs = argc > 2 ? atol(argv[2]) : 0;
  if (execs > 0) {
    fw_loop(2);
    char left[24], self[4096];
    snprintf(left, sizeof(left), "%ld", execs - 1);
    // By its own path, not /proc/self/exe: the name (comm) stays.
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
      return 127;
    self[n] = '\0';
    execl(self, argv[0], argv[1], left, (char *)NULL);
    return 127;
  }
  fw_loop(argc > 1 ? atol(argv[1]) : 0);
  KEEP();
  return 0;
}
