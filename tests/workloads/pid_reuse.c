// For pid_reuse_test.cpp (issue #27, bug 2): a traced process's child
// exits, and a process that is no descendant of anything traced gets its
// PID back.
//
//   pid_reuse parent DIR  (offcpu's -- COMMAND) forks a child that exits at
//       once, whose PID it writes to DIR/target, and one that blocks in
//       reuse_child_block (traced: the control); blocks in
//       reuse_parent_block until DIR/done exists, then ends the blocked
//       child and exits.
//   pid_reuse storm PID   forks until a child is given PID (the others exit
//       at once, so PIDs wrap around pid_max); that child names itself
//       reuse_stranger and blocks in reuse_stranger_block for good. Prints
//       "ready PID" then.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP() __asm__ volatile("" ::: "memory")

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NOINLINE void reuse_child_block(void) {
  for (;;)
    nap_ms(20);
}

NOINLINE void reuse_parent_block(const char *done) {
  while (access(done, F_OK) != 0)
    nap_ms(20);
  KEEP();
}

NOINLINE void reuse_stranger_block(void) {
  for (;;)
    nap_ms(20);
}

static int parent(const char *dir) {
  prctl(PR_SET_NAME, "reuse_parent");
  pid_t gone = fork();
  if (gone < 0)
    return 1;
  if (gone == 0)
    _exit(0);
  waitpid(gone, NULL, 0); // reaped: its PID is free for anyone now
  pid_t child = fork();
  if (child < 0)
    return 1;
  if (child == 0) {
    prctl(PR_SET_NAME, "reuse_child");
    reuse_child_block();
  }
  char tmp[4096], target[4096], done[4096];
  snprintf(tmp, sizeof(tmp), "%s/target.tmp", dir);
  snprintf(target, sizeof(target), "%s/target", dir);
  snprintf(done, sizeof(done), "%s/done", dir);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", (int)gone) < 0 || fclose(f) != 0 ||
      rename(tmp, target) != 0) {
    perror(target);
    kill(child, SIGKILL);
    return 1;
  }
  reuse_parent_block(done);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return 0;
}

static int storm(pid_t target) {
  prctl(PR_SET_NAME, "reuse_storm");
  const double t0 = now_s();
  while (now_s() - t0 < 60) {
    pid_t c = fork();
    if (c < 0) {
      if (errno != EAGAIN)
        return 1;
      nap_ms(1); // every PID in use for a moment: not ours to wait out
      continue;
    }
    if (c == 0) {
      if (getpid() != target)
        _exit(0);
      prctl(PR_SET_NAME, "reuse_stranger");
      reuse_stranger_block();
    }
    if (c == target) {
      printf("ready %d\n", (int)c);
      fflush(stdout);
      waitpid(c, NULL, 0);
      return 0;
    }
    waitpid(c, NULL, 0);
  }
  fprintf(stderr, "pid_reuse: PID %d was not given back in 60 s\n",
          (int)target);
  return 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "parent") == 0)
    return parent(argv[2]);
  if (argc == 3 && strcmp(argv[1], "storm") == 0)
    return storm((pid_t)atoi(argv[2]));
  fprintf(stderr, "usage: pid_reuse parent DIR | storm PID\n");
  return 2;
}
