// For many_mappings_test.cpp: a process whose threads block in hundreds of
// distinct libraries, each with its DWARF.
//
//   many_libs DIR COUNT
//
// dlopen()s the first COUNT files of DIR (copies of block_lib), starts a
// thread in each one's bl_block, prints "ready PID" and waits for good.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *run(void *fn) {
  ((void (*)(void))fn)();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: many_libs DIR COUNT\n");
    return 2;
  }
  long count = atol(argv[2]), started = 0;
  DIR *d = opendir(argv[1]);
  if (!d) {
    perror(argv[1]);
    return 1;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN + 64 * 1024);
  char path[PATH_MAX];
  for (struct dirent *e; started < count && (e = readdir(d));) {
    if (e->d_type != DT_REG)
      continue;
    snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *fn = lib ? dlsym(lib, "bl_block") : NULL;
    pthread_t t;
    if (!fn || pthread_create(&t, &attr, run, fn) != 0) {
      fprintf(stderr, "%s: %s\n", path, lib ? "no thread" : dlerror());
      return 1;
    }
    started++;
  }
  closedir(d);
  if (started != count) {
    fprintf(stderr, "%ld of %ld libraries in %s\n", started, count, argv[1]);
    return 1;
  }
  usleep(200000); // every thread blocked in its library
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    pause();
}
