// Part of the deferred_tables workload (tests/integration/
// deferred_tables_test.cpp): a library the program calls from its start,
// built without frame pointers, whose table a whole-system run builds only
// once a walk reaches it. dt_nap sleeps 5 ms through the C library
// (no frame pointers either): a walk with frame pointers alone stops in it.
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void dt_nap(void) {
  struct timespec ts = {0, 5 * 1000000L};
  nanosleep(&ts, 0);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void dt_lib_loop(int naps) {
  for (int i = 0; i < naps; i++)
    dt_nap();
  __asm__ volatile("" ::: "memory");
}
