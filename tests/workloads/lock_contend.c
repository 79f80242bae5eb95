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
//   lock_contend hold DIR [WAITERS [HOLD_MS]]  a thread named "holder", in
//       hold_file_lock, writes to DIR/held from a page that userfaultfd
//       keeps missing for HOLD_MS (default 20): the write faults it in
//       holding the file's i_rwsem, so the "waiter" threads, writing the
//       same file in write_shared_file, wait for the holder (--holders)
// Prints "ready PID" and runs until killed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

#define NOINLINE __attribute__((noinline))
#define CHUNK (256 * 1024)

static int shared_fd = -1;
static char dir_path[256];

NOINLINE void read_shared_file(int fd, char *buf) {
  long n = raw_syscall3(SYS_read, fd, (long)buf, CHUNK);
  if (n <= 0) // at the end: back to the start (also under f_pos_lock)
    raw_syscall3(SYS_lseek, fd, 0, SEEK_SET);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void make_and_remove(const char *path) {
  raw_syscall3(SYS_mkdir, (long)path, 0700, 0);
  raw_syscall3(SYS_rmdir, (long)path, 0, 0);
  __asm__ volatile("" ::: "memory");
}

// ---- hold: a file's i_rwsem held for a known time ----

static int held_fd = -1, uffd = -1, hold_ms = 20;
static char *missing_page;
static long page_size;

// Writes one byte from the missing page: the kernel takes the file's
// i_rwsem, then faults the page in (userfaultfd: the pager sleeps HOLD_MS
// first) and writes, holding the lock all along.
NOINLINE void hold_file_lock(void) {
  raw_syscall3(SYS_pwrite64, held_fd, (long)missing_page, 1);
  madvise(missing_page, page_size, MADV_DONTNEED); // missing again
  __asm__ volatile("" ::: "memory");
}

NOINLINE void write_shared_file(const char *byte) {
  raw_syscall6(SYS_pwrite64, held_fd, (long)byte, 1, 1, 0, 0);
  __asm__ volatile("" ::: "memory");
}

static void *holder_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "holder");
  for (;;)
    hold_file_lock();
  return NULL;
}

static void *waiter_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "waiter");
  char byte = 'w';
  for (;;)
    write_shared_file(&byte);
  return NULL;
}

// Resolves each fault of the missing page after hold_ms.
static void *pager_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "pager");
  char *src = calloc(1, page_size);
  for (;;) {
    struct uffd_msg msg;
    if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
      continue;
    if (msg.event != UFFD_EVENT_PAGEFAULT)
      continue;
    struct timespec t = {0, hold_ms * 1000000L};
    nanosleep(&t, NULL);
    struct uffdio_copy copy = {.dst = (unsigned long)missing_page,
                               .src = (unsigned long)src,
                               .len = page_size};
    ioctl(uffd, UFFDIO_COPY, &copy);
  }
  return NULL;
}

static int start_hold(const char *dir, int waiters) {
  char path[300];
  snprintf(path, sizeof(path), "%s/held", dir);
  held_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  page_size = sysconf(_SC_PAGESIZE);
  missing_page = mmap(NULL, page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
  struct uffdio_api api = {.api = UFFD_API};
  struct uffdio_register reg = {
      .range = {(unsigned long)missing_page, page_size},
      .mode = UFFDIO_REGISTER_MODE_MISSING};
  if (held_fd < 0 || missing_page == MAP_FAILED || uffd < 0 ||
      ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg)) {
    perror("hold");
    return -1;
  }
  pthread_t t;
  pthread_create(&t, NULL, pager_thread, NULL);
  pthread_create(&t, NULL, holder_thread, NULL);
  for (int i = 0; i < waiters; i++)
    pthread_create(&t, NULL, waiter_thread, NULL);
  return 0;
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
  if (strcmp(mode, "hold") == 0 && argc > 2) {
    if (argc > 4)
      hold_ms = atoi(argv[4]);
    if (start_hold(argv[2], argc > 3 ? atoi(argv[3]) : 2))
      return 1;
    printf("ready %d\n", getpid());
    fflush(stdout);
    pause();
    return 0;
  }
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
    fprintf(stderr, "usage: lock_contend fpos|dir DIR [THREADS]|hold DIR "
                    "[WAITERS [HOLD_MS]]\n");
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
