// For the hostile workloads: block in nanosleep with the frame pointer aimed
// at two forged frames, so a frame-pointer walk of this stack reports `inner`
// and then `outer` as the callers. The frames sit in increasing order, as a
// walk expects of a real stack.
#pragma once

#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

// Not inlined nor cloned (a .constprop copy would change the frame's name).
#if defined(__GNUC__) && !defined(__clang__)
#define FORGED_FRAMES_NOINLINE __attribute__((noinline, noclone))
#else
#define FORGED_FRAMES_NOINLINE __attribute__((noinline))
#endif

FORGED_FRAMES_NOINLINE static void
block_with_forged_frames(uint64_t inner, uint64_t outer, long ms) {
  uint64_t frames[4];
  frames[0] = (uint64_t)&frames[2];
  frames[1] = inner;
  frames[2] = 0;
  frames[3] = outer;
  struct timespec ts = {0, ms * 1000000L};
  long ret;
  // rbp is saved in r12, not pushed: a push could land on our own locals in
  // the red zone.
  __asm__ volatile("mov %%rbp, %%r12\n\t"
                   "mov %[fp], %%rbp\n\t"
                   "syscall\n\t"
                   "mov %%r12, %%rbp"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0), [fp] "r"(frames)
                   : "rcx", "r11", "r12", "memory");
  (void)ret;
}
