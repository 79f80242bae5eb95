// Waits in progress when offcpu attaches (tests/integration/
// seeded_waits_test.cpp), built without frame pointers: only a walk with
// the unwind tables names the functions above the system call.
//   seeded_waits SECONDS   prints "ready PID", then the main thread naps
//                          SECONDS in sw_nap_from_before() (its wait is open
//                          when the window opens) and 20 ms at a time in
//                          sw_nap_after() until killed; a second thread,
//                          "sw_stuck", reads a pipe nobody writes in
//                          sw_block_all_window().
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

static int stuck_fds[2];

NOINLINE void sw_nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
  KEEP();
}

NOINLINE void sw_nap_from_before(long ms) {
  sw_nap(ms);
  KEEP();
}

NOINLINE void sw_nap_after(void) {
  sw_nap(20);
  KEEP();
}

NOINLINE void sw_block_all_window(void) {
  char c;
  raw_syscall3(SYS_read, stuck_fds[0], (long)&c, 1);
  KEEP();
}

static void *stuck(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "sw_stuck");
  for (;;)
    sw_block_all_window();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: seeded_waits SECONDS\n");
    return 2;
  }
  long ms = (long)(atof(argv[1]) * 1000);
  pthread_t t;
  if (pipe(stuck_fds) != 0 || pthread_create(&t, NULL, stuck, NULL) != 0)
    return 1;
  printf("ready %d\n", getpid());
  fflush(stdout);
  sw_nap_from_before(ms);
  for (;;)
    sw_nap_after();
}
