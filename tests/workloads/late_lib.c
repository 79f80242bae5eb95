// Loaded by short_lived's children with dlopen() after their first wait:
// code their maps did not hold when their first stack was announced.
#include <sys/syscall.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

// 20 ms asleep, by an inline system call: the wait's leaf is this
// function, not the C library's.
NOINLINE void late_lib_nap(void) {
  struct timespec ts = {0, 20 * 1000000L};
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  (void)ret;
}
