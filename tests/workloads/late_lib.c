// Loaded by short_lived's children with dlopen() after their first wait:
// code their maps did not hold when their first stack was announced.
#include <sys/syscall.h>
#include <time.h>

#include "raw_syscall.h"

// 20 ms asleep, by an inline system call: the wait's leaf is this
// function, not the C library's.
__attribute__((noinline)) void late_lib_nap(void) {
  struct timespec ts = {0, 20 * 1000000L};
  raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}
