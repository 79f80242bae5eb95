// Sleeps 1 ms at a time in fw_nap() from its first instruction, built
// without frame pointers (tests/integration/first_waits_test.cpp): a walk
// by frame pointers alone cannot get from the sleep up to main, so only
// waits walked with the unwind tables name fw_nap and main.
//   first_waits N   N naps, then exit (0: until killed)
#include <stdlib.h>
#include <time.h>

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
  fw_loop(argc > 1 ? atol(argv[1]) : 0);
  KEEP();
  return 0;
}
