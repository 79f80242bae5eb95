// System calls made by an inline `syscall` instruction in the calling
// function, for workloads whose tests check the user stack: a libc
// wrapper (Debian's glibc has no frame pointers) would hide the caller.
// x86-64 only, like the workloads that use it.
#ifndef OFFCPU_WORKLOAD_RAW_SYSCALL_H
#define OFFCPU_WORKLOAD_RAW_SYSCALL_H

static inline long raw_syscall6(long nr, long a, long b, long c, long d, long e,
                                long f) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

static inline long raw_syscall3(long nr, long a, long b, long c) {
  return raw_syscall6(nr, a, b, c, 0, 0, 0);
}

#endif
