// Threads of one process that fight over their mm's mmap_lock for writing:
// each maps, touches and unmaps anonymous memory in a loop inside
// churn_mappings(). For offcpu rwsem's integration tests. Built with frame
// pointers; the system calls are made with inline `syscall` from the named
// function, so the user stack is exact (glibc has no frame pointers).
// With --uts, the threads fight over a kernel-global rwsem instead, uts_sem,
// by setting the host name (in a UTS namespace of their own, so the host's
// name is untouched): for lock names resolved to kernel data symbols.
//   mmap_churn [--uts] [THREADS]    prints "ready PID", runs until killed
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw_syscall.h"

#define NOINLINE __attribute__((noinline))
#define CHUNK (256 * 1024)

NOINLINE void churn_mappings(void) {
  long p = raw_syscall6(SYS_mmap, 0, CHUNK, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p < 0 && p > -4096)
    return;
  for (long off = 0; off < CHUNK; off += 4096)
    ((volatile char *)p)[off] = 1; // page faults: mmap_lock for reading
  raw_syscall6(SYS_munmap, p, CHUNK, 0, 0, 0, 0);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void churn_hostname(void) {
  static const char name[] = "offcpu-uts-churn";
  raw_syscall6(SYS_sethostname, (long)name, sizeof(name) - 1, 0, 0, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *churn_thread(void *arg) {
  (void)arg;
  for (;;)
    churn_mappings();
  return NULL;
}

static void *hostname_thread(void *arg) {
  (void)arg;
  for (;;)
    churn_hostname();
  return NULL;
}

int main(int argc, char **argv) {
  int uts = argc > 1 && strcmp(argv[1], "--uts") == 0;
  if (uts && unshare(CLONE_NEWUTS)) {
    perror("unshare(CLONE_NEWUTS)");
    return 1;
  }
  int threads = argc > 1 + uts ? atoi(argv[1 + uts]) : 4;
  for (int i = 0; i < threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, uts ? hostname_thread : churn_thread, NULL)) {
      perror("pthread_create");
      return 1;
    }
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    pause();
}
