// Hostile ELF files and vDSO images for tests/integration/
// hostile_symbols_test.cpp (issue #26): the test writes the files with its
// ELF writer, this program puts them where offcpu (root) reads them. Prints
// "ready PID" once set up, then blocks until killed. Built with frame
// pointers.
//
//   map NAME DELAY_MS OFFSET FILE...
//       sets its name to NAME, waits DELAY_MS, then maps each FILE r-x whole;
//       one thread per file blocks with a forged return address at the
//       file's OFFSET (hex), as if that code had called nanosleep
//   nsmap DEBUG BUILDID NAME DELAY_MS OFFSET FILE...
//       the same, run under `unshare -Urm`: first mounts a tmpfs of its own
//       on /usr/lib/debug and puts DEBUG there as the debug file of the
//       build id BUILDID (hex); "bind:PATH" bind-mounts PATH there instead
//       of a copy (a file someone else owns)
//   vdso NAME [rewrite]
//       blocks with a forged return address inside its vDSO's
//       clock_gettime; with "rewrite", first renames clock_gettime to
//       PWNED_gettime in its own vDSO, written through /proc/self/mem
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "forged_frames.h"

#define NOINLINE __attribute__((noinline))

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void ready(void) {
  printf("ready %d\n", getpid());
  fflush(stdout);
}

NOINLINE void hostile_elf_outer(void) {
  __asm__ volatile("" ::: "memory");
}

static void *forever_under(void *arg) {
  uint64_t ret = (uint64_t)(uintptr_t)arg;
  for (;;)
    block_with_forged_frames(ret, (uint64_t)&hostile_elf_outer + 1, 20);
  return NULL;
}

static void set_name(const char *name) {
  if (prctl(PR_SET_NAME, name, 0, 0, 0) != 0)
    die("prctl");
}

static int mode_map(int argc, char **argv) {
  if (argc < 6)
    return 2;
  set_name(argv[2]);
  long delay = atol(argv[3]);
  uint64_t offset = strtoull(argv[4], NULL, 16);
  ready();
  if (delay > 0) {
    struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  for (int i = 5; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
      die(argv[i]);
    unsigned char *map =
        mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
      die("mmap");
    close(fd);
    pthread_t t;
    if (pthread_create(&t, NULL, forever_under,
                       (void *)(uintptr_t)(map + offset)))
      die("pthread_create");
  }
  for (;;)
    pause();
}

static void copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0)
    die(in < 0 ? from : to);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof(buf))) > 0)
    if (write(out, buf, (size_t)n) != n)
      die(to);
  close(in);
  close(out);
}

static int mode_nsmap(int argc, char **argv) {
  if (argc < 8 || strlen(argv[3]) < 3)
    return 2;
  // Root of our own user namespace: this /usr/lib/debug is ours alone.
  if (mount("none", "/usr/lib/debug", "tmpfs", 0, "mode=0755") != 0)
    die("mount tmpfs on /usr/lib/debug (run under unshare -Urm)");
  char dir[256], path[512];
  snprintf(dir, sizeof(dir), "/usr/lib/debug/.build-id/%.2s", argv[3]);
  if (mkdir("/usr/lib/debug/.build-id", 0755) != 0 || mkdir(dir, 0755) != 0)
    die(dir);
  snprintf(path, sizeof(path), "%s/%s.debug", dir, argv[3] + 2);
  if (strncmp(argv[2], "bind:", 5) == 0) {
    // Someone else's file, as it is (its owner stays its owner).
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || close(fd) != 0 ||
        mount(argv[2] + 5, path, NULL, MS_BIND, NULL) != 0)
      die("bind mount the debug file");
  } else {
    copy_file(argv[2], path);
  }
  // The rest as "map NAME DELAY_MS OFFSET FILE...".
  argv[3] = (char *)"map";
  return mode_map(argc - 2, argv + 2);
}

// The address of `want` in our vDSO, from its dynamic symbols; 0 if none.
static uint64_t vdso_symbol(const char *want) {
  const unsigned char *base =
      (const unsigned char *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (!base)
    return 0;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
  uint64_t bias = (uint64_t)(uintptr_t)base;
  for (int i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD) {
      bias -= ph[i].p_vaddr - ph[i].p_offset;
      break;
    }
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    const Elf64_Sym *syms = (const Elf64_Sym *)(base + sh[i].sh_offset);
    const char *names = (const char *)(base + sh[sh[i].sh_link].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++)
      if (strcmp(names + syms[k].st_name, want) == 0)
        return bias + syms[k].st_value;
  }
  return 0;
}

// Renames clock_gettime in our own vDSO: its text is read-only, but
// /proc/self/mem writes through (the kernel copies the page for us alone).
static void rewrite_vdso(void) {
  unsigned char *base = (unsigned char *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
  size_t size = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  while (maps && fgets(line, sizeof(line), maps)) {
    unsigned long start, end;
    if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &start, &end) == 2)
      size = end - start;
  }
  if (maps)
    fclose(maps);
  if (!base || !size)
    die("no vdso");
  int mem = open("/proc/self/mem", O_RDWR);
  if (mem < 0)
    die("/proc/self/mem");
  static const char from[] = "clock_gettime", to[] = "PWNED_gettime";
  int n = 0;
  for (size_t i = 0; i + sizeof(from) - 1 <= size; i++)
    if (memcmp(base + i, from, sizeof(from) - 1) == 0) {
      if (pwrite(mem, to, sizeof(to) - 1, (off_t)(uintptr_t)(base + i)) !=
          (ssize_t)(sizeof(to) - 1))
        die("write /proc/self/mem");
      n++;
    }
  close(mem);
  if (n == 0)
    die("clock_gettime not in the vdso");
}

static int mode_vdso(int argc, char **argv) {
  if (argc < 3)
    return 2;
  set_name(argv[2]);
  // Looked up before the rewrite renames it.
  uint64_t fn = vdso_symbol("__vdso_clock_gettime");
  if (!fn)
    fn = vdso_symbol("clock_gettime");
  if (!fn)
    die("clock_gettime not found in the vdso");
  if (argc > 3 && strcmp(argv[3], "rewrite") == 0)
    rewrite_vdso();
  ready();
  forever_under((void *)(uintptr_t)(fn + 8));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hostile_elf MODE ARGS...\n");
    return 2;
  }
  int rc = 2;
  if (strcmp(argv[1], "map") == 0)
    rc = mode_map(argc, argv);
  else if (strcmp(argv[1], "nsmap") == 0)
    rc = mode_nsmap(argc, argv);
  else if (strcmp(argv[1], "vdso") == 0)
    rc = mode_vdso(argc, argv);
  if (rc == 2)
    fprintf(stderr, "hostile_elf: bad arguments for %s\n", argv[1]);
  return rc;
}
