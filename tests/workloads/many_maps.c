// For many_mappings_test.cpp (issue #27, bug 4): a process with hundreds
// of executable mappings (as many plugins or JIT regions make), which then
// blocks in nanosleep through libc, three calls deep. Built without frame
// pointers, as Debian builds libc: its stack is whole only if the unwind
// tables of both the program and libc are in use.
//
//   many_maps COUNT FILE|DIR SECONDS [LIBRARY]
//
// Maps FILE whole COUNT times, readable and executable (each a mapping of
// its own), and, with LIBRARY, dlopen()s it (a large library mapped after
// start). A DIR: maps each of its first COUNT files once (many distinct
// files, as a process with many plugins has). SECONDS 0: prints "ready
// PID" and blocks for good; else blocks that long, silently, and exits 0
// (run as offcpu's -- COMMAND).
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

static double seconds;

NOINLINE void mm_sleep_inner(void) {
  if (seconds > 0) {
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    return;
  }
  struct timespec ts = {3600, 0};
  for (;;)
    nanosleep(&ts, NULL);
}

NOINLINE void mm_sleep_middle(void) {
  mm_sleep_inner();
  KEEP();
}

NOINLINE void mm_sleep_outer(void) {
  mm_sleep_middle();
  KEEP();
}

// Maps the file at `fd` whole, `times` times; 0 on success.
static int map_file(int fd, long times) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size == 0)
    return -1;
  for (long i = 0; i < times; i++)
    if (mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd,
             0) == MAP_FAILED)
      return -1;
  return 0;
}

// Maps each of the first `count` regular files of `dir` once.
static int map_dir(const char *dir, long count) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  long mapped = 0;
  for (struct dirent *e; mapped < count && (e = readdir(d));) {
    if (e->d_type != DT_REG)
      continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY);
    if (fd < 0 || map_file(fd, 1) != 0) {
      closedir(d);
      return -1;
    }
    close(fd);
    mapped++;
  }
  closedir(d);
  return mapped == count ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: many_maps COUNT FILE|DIR SECONDS [LIBRARY]\n");
    return 2;
  }
  long count = atol(argv[1]);
  seconds = atof(argv[3]);
  int fd = open(argv[2], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 ||
      (S_ISDIR(st.st_mode) ? map_dir(argv[2], count) : map_file(fd, count)) !=
          0) {
    perror(argv[2]);
    return 1;
  }
  close(fd);
  if (argc > 4 && !dlopen(argv[4], RTLD_NOW | RTLD_LOCAL)) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  if (seconds <= 0) {
    printf("ready %d\n", getpid());
    fflush(stdout);
  }
  mm_sleep_outer();
  KEEP();
  return 0;
}
