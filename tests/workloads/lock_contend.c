// Threads that contend kernel locks in known ways, each in a named function,
// for offcpu lock's integration tests. Built with frame pointers; system
// calls are made with inline `syscall` from the named function, so the user
// stack is exact (glibc has no frame pointers).
//   lock_contend fpos [THREADS]  read_shared_file: every thread reads 256 KiB
//       at a time through its own dup of one file description, so each read
//       takes that description's f_pos_lock (a mutex; taken only when the
//       description has more than one reference)
//   lock_contend dir DIR [THREADS]  make_and_remove: mkdir/rmdir of a name
//       of its own in DIR, each taking DIR's i_rwsem for writing
// Prints "ready PID" and runs until killed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define CHUNK (256 * 1024)

static long raw_syscall4(long nr, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
}

static int shared_fd = -1;
static char dir_path[256];

NOINLINE void read_shared_file(int fd, char *buf) {
  long n = raw_syscall4(SYS_read, fd, (long)buf, CHUNK, 0);
  if (n <= 0) // at the end: back to the start (also under f_pos_lock)
    raw_syscall4(SYS_lseek, fd, 0, SEEK_SET, 0);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void make_and_remove(const char *path) {
  raw_syscall4(SYS_mkdir, (long)path, 0700, 0, 0);
  raw_syscall4(SYS_rmdir, (long)path, 0, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *fpos_thread(void *arg) {
  (void)arg;
  int fd = dup(shared_fd);
  char *buf = malloc(CHUNK);
  if (fd < 0 || !buf)
    abort();
  for (;;)
    read_shared_file(fd, buf);
  return NULL;
}

static void *dir_thread(void *arg) {
  char path[300];
  snprintf(path, sizeof(path), "%s/d%ld", dir_path, (long)arg);
  for (;;)
    make_and_remove(path);
  return NULL;
}

// A 4 MiB file, unlinked at once: reads come from the page cache.
static int make_file(void) {
  char path[] = "/tmp/lock_contend_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  unlink(path);
  char *block = calloc(1, CHUNK);
  for (int i = 0; block && i < 16; i++)
    if (write(fd, block, CHUNK) != CHUNK)
      return -1;
  free(block);
  return fd;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "fpos";
  int dir = strcmp(mode, "dir") == 0 && argc > 2;
  int threads = argc > 2 + dir ? atoi(argv[2 + dir]) : 4;
  void *(*body)(void *) = NULL;
  if (strcmp(mode, "fpos") == 0) {
    shared_fd = make_file();
    body = fpos_thread;
  } else if (dir) {
    snprintf(dir_path, sizeof(dir_path), "%s", argv[2]);
    body = dir_thread;
  }
  if (!body || (body == fpos_thread && shared_fd < 0)) {
    fprintf(stderr, "usage: lock_contend fpos|dir DIR [THREADS]\n");
    return 2;
  }
  for (long i = 0; i < threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, body, (void *)i)) {
      perror("pthread_create");
      return 1;
    }
  }
  printf("ready %d\n", getpid());
  fflush(stdout);
  pause();
  return 0;
}
