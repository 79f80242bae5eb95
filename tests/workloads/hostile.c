// Hostile processes for the HostileFiles tests (issue #10): run by an
// unprivileged user, each one feeds offcpu (root) files that user controls.
// One program, the attack chosen by argv[1]; prints "ready PID" once set up,
// then blocks until killed. Built with frame pointers.
//
//   jit symlink TARGET      perf map: a symlink to TARGET
//   jit ns-symlink TARGET   the same in a private tmpfs /tmp: run it under
//                           `unshare -Urm`, it mounts the tmpfs itself
//   jit fifo                perf map: a FIFO kept open, a line every 100 ms
//   jit legit               perf map: a regular file naming the JIT code
//   jit big MB              perf map: a legitimate file of MB megabytes
//   jit-many TARGET         perf map a symlink to TARGET; a new JIT mapping
//                           every few ms, so each stack is new and needs a
//                           new maps (and perf map) reading
//   sigbus SRC FILE         FILE, a copy of SRC, mapped r-x; a thread blocks
//                           with forged frames inside it while another
//                           truncates and restores FILE, again and again
//   comm NAME               sets the process name to the bytes NAME
//   sleep                   blocks in block_in_nanosleep
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "forged_frames.h"

#define NOINLINE __attribute__((noinline))

typedef long (*sleep_fn)(const struct timespec *, struct timespec *);

// What the JIT emits: a nanosleep system call, so the leaf user frame is an
// address in anonymous memory that only a perf map can name.
static const unsigned char jit_code[] = {
    0xb8, 0x23, 0x00, 0x00, 0x00, // mov eax, 35 (nanosleep)
    0x0f, 0x05,                   // syscall
    0xc3,                         // ret
};
enum { kJitOffset = 64 };

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void ready(void) {
  printf("ready %d\n", getpid());
  fflush(stdout);
}

static long raw_nanosleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  return ret;
}

NOINLINE void block_in_nanosleep(long ms) {
  raw_nanosleep(ms);
  __asm__ volatile("" ::: "memory");
}

static unsigned char *emit_jit(void) {
  unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    die("mmap");
  memcpy(mem + kJitOffset, jit_code, sizeof(jit_code));
  return mem + kJitOffset;
}

static void run_jit_forever(unsigned char *code, long ms) {
  sleep_fn fn = (sleep_fn)code;
  struct timespec ts = {0, ms * 1000000L};
  for (;;)
    fn(&ts, NULL);
}

static void perf_map_path(char *buf, size_t size) {
  snprintf(buf, size, "/tmp/perf-%d.map", getpid());
}

static void perf_map_symlink(const char *target) {
  char path[64];
  perf_map_path(path, sizeof(path));
  unlink(path);
  if (symlink(target, path) != 0)
    die(path);
}

static void *fifo_writer(void *arg) {
  // Opened read-write, so the open does not wait for a reader and the FIFO
  // never reports end of file to one.
  int fd = open((const char *)arg, O_RDWR);
  if (fd < 0)
    die("open fifo");
  for (;;) {
    static const char line[] = "0 1000 fifo_line\n";
    if (write(fd, line, sizeof(line) - 1) < 0)
      die("write fifo");
    block_in_nanosleep(100);
  }
  return NULL;
}

// A map a JIT with a lot of code would write: many distinct names in a
// reserved region, then the code the process really runs.
static void write_big_perf_map(const unsigned char *code, long megabytes) {
  const size_t line_guess = 72;
  size_t lines = (size_t)megabytes * 1000000 / line_guess;
  char *region = mmap(NULL, lines * 64, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED)
    die("mmap region");
  char path[64];
  perf_map_path(path, sizeof(path));
  FILE *map = fopen(path, "w");
  if (!map)
    die(path);
  long target = megabytes * 1000000L;
  for (size_t i = 0; ftell(map) < target; i++)
    fprintf(map, "%lx 40 LazyCompile:~handler_%07zu /srv/app/bundle.js:%zu\n",
            (unsigned long)(region + (i % lines) * 64), i, i % 9973);
  fprintf(map, "%lx %zx jit_compiled_sleep\n", (unsigned long)code,
          sizeof(jit_code));
  if (fclose(map) != 0)
    die(path);
}

static int mode_jit(int argc, char **argv) {
  if (argc < 3)
    return 2;
  const char *kind = argv[2];
  unsigned char *code = emit_jit();
  char path[64];
  perf_map_path(path, sizeof(path));
  if (strcmp(kind, "symlink") == 0 && argc > 3) {
    perf_map_symlink(argv[3]);
  } else if (strcmp(kind, "ns-symlink") == 0 && argc > 3) {
    // Root of our own user namespace: this /tmp is ours alone.
    if (mount("none", "/tmp", "tmpfs", 0, "mode=0755") != 0)
      die("mount tmpfs on /tmp (run under unshare -Urm)");
    perf_map_symlink(argv[3]);
  } else if (strcmp(kind, "fifo") == 0) {
    unlink(path);
    if (mkfifo(path, 0644) != 0)
      die(path);
    pthread_t t;
    if (pthread_create(&t, NULL, fifo_writer, path))
      die("pthread_create");
  } else if (strcmp(kind, "legit") == 0) {
    FILE *map = fopen(path, "w");
    if (!map)
      die(path);
    fprintf(map, "%lx %zx jit_compiled_sleep\n", (unsigned long)code,
            sizeof(jit_code));
    fclose(map);
  } else if (strcmp(kind, "big") == 0 && argc > 3) {
    write_big_perf_map(code, atol(argv[3]));
  } else {
    return 2;
  }
  ready();
  run_jit_forever(code, 20);
  return 0;
}

static int mode_jit_many(int argc, char **argv) {
  if (argc < 3)
    return 2;
  perf_map_symlink(argv[2]);
  ready();
  // Pages are never unmapped, so no address (no stack) comes back; a cap
  // keeps a forgotten process from growing without end.
  for (int i = 0; i < 4000; i++) {
    sleep_fn fn = (sleep_fn)emit_jit();
    struct timespec ts = {0, 8 * 1000000L};
    fn(&ts, NULL);
  }
  run_jit_forever(emit_jit(), 20);
  return 0;
}

struct victim {
  int fd;
  char *content;
  size_t size;
  unsigned char *map;
};

static void *forged_sleeper(void *arg) {
  struct victim *v = arg;
  for (;;)
    block_with_forged_frames((uint64_t)(v->map + v->size / 2),
                             (uint64_t)(v->map + v->size / 3), 10);
  return NULL;
}

// The file stays whole for 50 ms at a time, so a reader that opens it most
// likely maps all of it, and is then cut short while it reads: measured,
// this kills a reader that maps the file in about 7 runs out of 10.
static void *truncator(void *arg) {
  struct victim *v = arg;
  for (;;) {
    if (ftruncate(v->fd, 0) != 0)
      die("ftruncate");
    // A short write (full disk) leaves the file short: still hostile.
    if (pwrite(v->fd, v->content, v->size, 0) < 0)
      die("pwrite");
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static int mode_sigbus(int argc, char **argv) {
  if (argc < 4)
    return 2;
  static struct victim v;
  int src = open(argv[2], O_RDONLY);
  struct stat st;
  if (src < 0 || fstat(src, &st) != 0 || st.st_size == 0)
    die(argv[2]);
  v.size = (size_t)st.st_size;
  v.content = malloc(v.size);
  if (!v.content || read(src, v.content, v.size) != (ssize_t)v.size)
    die("read source");
  close(src);
  v.fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0755);
  if (v.fd < 0 || write(v.fd, v.content, v.size) != (ssize_t)v.size)
    die(argv[3]);
  v.map = mmap(NULL, v.size, PROT_READ | PROT_EXEC, MAP_PRIVATE, v.fd, 0);
  if (v.map == MAP_FAILED)
    die("mmap victim");
  pthread_t sleeper, trunc;
  if (pthread_create(&sleeper, NULL, forged_sleeper, &v) ||
      pthread_create(&trunc, NULL, truncator, &v))
    die("pthread_create");
  ready();
  for (;;)
    pause();
}

static int mode_comm(int argc, char **argv) {
  if (argc < 3)
    return 2;
  if (prctl(PR_SET_NAME, argv[2], 0, 0, 0) != 0)
    die("prctl");
  ready();
  for (;;)
    block_in_nanosleep(20);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hostile MODE ARGS...\n");
    return 2;
  }
  const char *mode = argv[1];
  int rc = 2;
  if (strcmp(mode, "jit") == 0)
    rc = mode_jit(argc, argv);
  else if (strcmp(mode, "jit-many") == 0)
    rc = mode_jit_many(argc, argv);
  else if (strcmp(mode, "sigbus") == 0)
    rc = mode_sigbus(argc, argv);
  else if (strcmp(mode, "comm") == 0)
    rc = mode_comm(argc, argv);
  else if (strcmp(mode, "sleep") == 0) {
    ready();
    for (;;)
      block_in_nanosleep(20);
  }
  if (rc == 2)
    fprintf(stderr, "hostile: bad arguments for %s\n", mode);
  return rc;
}
