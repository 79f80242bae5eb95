// Threads blocked through glibc in code built without frame pointers
// (-O2 -fomit-frame-pointer), for the tests that compare offcpu's user
// stacks with gdb's. Each thread is named and blocks for good:
//   nf_sleep   nanosleep() three calls deep
//   nf_read    read() of a pipe nobody writes
//   nf_cond    pthread_cond_wait()
//   nf_signal  inside a SIGUSR1 handler (a signal frame on the stack)
//   nf_dlopen  in a library loaded with dlopen() after start
//   main       waitpid() on a child that sleeps
// Prints "ready PID" once every thread is blocked.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

static int never_written[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int blocked;

NOINLINE void nf_sleep_inner(void) {
  struct timespec ts = {3600, 0};
  for (;;)
    nanosleep(&ts, NULL);
}

NOINLINE void nf_sleep_middle(void) {
  nf_sleep_inner();
  KEEP();
}

NOINLINE void *nf_sleep_main(void *arg) {
  (void)arg;
  __sync_fetch_and_add(&blocked, 1);
  nf_sleep_middle();
  KEEP();
  return NULL;
}

NOINLINE void nf_read_block(void) {
  char c;
  for (;;)
    if (read(never_written[0], &c, 1) <= 0)
      break;
  KEEP();
}

NOINLINE void *nf_read_main(void *arg) {
  (void)arg;
  __sync_fetch_and_add(&blocked, 1);
  nf_read_block();
  KEEP();
  return NULL;
}

NOINLINE void nf_cond_block(void) {
  pthread_mutex_lock(&mu);
  for (;;)
    pthread_cond_wait(&cv, &mu);
  KEEP();
}

NOINLINE void *nf_cond_main(void *arg) {
  (void)arg;
  __sync_fetch_and_add(&blocked, 1);
  nf_cond_block();
  KEEP();
  return NULL;
}

NOINLINE void nf_in_handler(void) {
  struct timespec ts = {3600, 0};
  for (;;)
    nanosleep(&ts, NULL);
  KEEP();
}

static void on_usr1(int sig) {
  (void)sig;
  nf_in_handler();
}

NOINLINE void nf_before_signal(void) {
  pthread_kill(pthread_self(), SIGUSR1);
  KEEP();
}

NOINLINE void *nf_signal_main(void *arg) {
  (void)arg;
  __sync_fetch_and_add(&blocked, 1);
  nf_before_signal();
  KEEP();
  return NULL;
}

NOINLINE void *nf_dlopen_main(void *arg) {
  const char *lib = arg;
  void *h = dlopen(lib, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
    exit(1);
  }
  void (*block)(int) = (void (*)(int))dlsym(h, "nf_lib_block");
  if (!block)
    exit(1);
  __sync_fetch_and_add(&blocked, 1);
  block(never_written[0]);
  KEEP();
  return NULL;
}

NOINLINE void nf_wait_child(pid_t child) {
  int status;
  waitpid(child, &status, 0);
  KEEP();
}

static void start(const char *name, void *(*fn)(void *), void *arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg)) {
    perror("pthread_create");
    exit(1);
  }
  pthread_setname_np(t, name);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nofp LIBRARY\n");
    return 2;
  }
  if (pipe(never_written))
    return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  start("nf_sleep", nf_sleep_main, NULL);
  start("nf_read", nf_read_main, NULL);
  start("nf_cond", nf_cond_main, NULL);
  start("nf_signal", nf_signal_main, NULL);
  start("nf_dlopen", nf_dlopen_main, argv[1]);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    // The tests SIGKILL the parent: the child must not outlive it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(0);
    pause();
    _exit(0);
  }
  while (blocked < 5)
    usleep(1000);
  usleep(100000); // the last ones reach their system calls
  printf("ready %d\n", getpid());
  fflush(stdout);
  nf_wait_child(child);
  return 0;
}
