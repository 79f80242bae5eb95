// Loaded by the nofp workload with dlopen() after it started: a library
// the unwinder learns about only once it is mapped.
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void nf_lib_inner(int fd) {
  char c;
  for (;;)
    if (read(fd, &c, 1) <= 0)
      break;
  __asm__ volatile("" ::: "memory");
}

void nf_lib_block(int fd) {
  nf_lib_inner(fd);
  __asm__ volatile("" ::: "memory");
}
