// A "JIT": machine code written at run time into anonymous memory, with a
// perf map (/tmp/perf-PID.map) naming it, as JIT runtimes do for perf.
// The generated function makes a nanosleep system call.
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef long (*sleep_fn)(const struct timespec *, struct timespec *);

int main(void) {
  static const unsigned char code[] = {
      0xb8, 0x23, 0x00, 0x00, 0x00, // mov eax, 35 (nanosleep)
      0x0f, 0x05,                   // syscall
      0xc3,                         // ret
  };
  unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memcpy(mem + 64, code, sizeof(code));
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
  FILE *map = fopen(path, "w");
  if (!map) {
    perror(path);
    return 1;
  }
  fprintf(map, "%lx %zx jit_compiled_sleep\n", (unsigned long)(mem + 64),
          sizeof(code));
  fclose(map);
  printf("ready %d\n", getpid());
  fflush(stdout);
  sleep_fn fn = (sleep_fn)(mem + 64);
  struct timespec ts = {0, 20 * 1000000L};
  for (;;)
    fn(&ts, NULL);
}
