// For the hostile unwind-table tests (issue #26): run by the unprivileged
// test user, maps each FILE whole, readable and executable, as a loader
// would map code, so offcpu (root) builds the files' unwind tables; prints
// "ready PID", then blocks in nanosleep for good. Built with frame
// pointers: its own stack is whole either way.
//
//   map_exec FILE...
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE void map_exec_block(void) {
  struct timespec ts = {3600, 0};
  for (;;)
    nanosleep(&ts, NULL);
}

NOINLINE void map_exec_wait(void) {
  map_exec_block();
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
      perror(argv[i]);
      return 1;
    }
    // The whole file, however large: a sparse terabyte costs only
    // address space.
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE,
                   fd, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    close(fd);
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  map_exec_wait();
  return 0;
}
