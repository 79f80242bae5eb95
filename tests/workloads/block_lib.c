// For many_mappings_test.cpp: a library with DWARF (-g) whose one function
// blocks for good. The test copies it hundreds of times; many_libs
// (many_libs.c) blocks a thread in each copy, so that stacks reach that
// many distinct files with DWARF.
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void bl_block(void) {
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, 0);
    __asm__ volatile("" ::: "memory");
  }
}
