// One slow request, for the timeline's tests (timeline_test.cpp): thread
// "request" waits in wait_for_reply() on a condition variable; thread
// "worker" does a slow "I/O" in slow_io() (a 50 ms nanosleep, which a timer
// ends), then wakes the request from send_reply(). Each prints, by
// CLOCK_MONOTONIC, what it measured around its own calls:
//   request TID START_NS END_NS    (around wait_for_reply)
//   waiting TID T_NS T_NS          (wait_for_reply about to block)
//   io TID START_NS END_NS         (around slow_io)
//   reply TID START_NS END_NS      (from slow_io's end to send_reply's)
// then the program exits. It first prints "ready PID" and sleeps DELAY_MS
// (its argument; default 300) so that a tracer has time to attach.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t replied = PTHREAD_COND_INITIALIZER;
static int done, waiting;
static unsigned long long waiting_since; // under `lock`, once waiting

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static pid_t tid(void) {
  return (pid_t)syscall(SYS_gettid);
}

NOINLINE void wait_for_reply(void) {
  pthread_mutex_lock(&lock);
  waiting = 1;
  waiting_since = now_ns();
  while (!done)
    pthread_cond_wait(&replied, &lock);
  pthread_mutex_unlock(&lock);
  __asm__ volatile("" ::: "memory"); // not a tail call: keep the frame
}

NOINLINE void slow_io(void) {
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void send_reply(void) {
  pthread_mutex_lock(&lock);
  done = 1;
  pthread_cond_signal(&replied);
  pthread_mutex_unlock(&lock);
  __asm__ volatile("" ::: "memory");
}

static void *request_main(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, "request");
  unsigned long long start = now_ns();
  wait_for_reply();
  unsigned long long end = now_ns();
  printf("request %d %llu %llu\n", tid(), start, end);
  printf("waiting %d %llu %llu\n", tid(), waiting_since, waiting_since);
  return NULL;
}

static void *worker_main(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, "worker");
  // Once the request waits: its wait then spans the whole I/O.
  for (;;) {
    pthread_mutex_lock(&lock);
    int w = waiting;
    pthread_mutex_unlock(&lock);
    if (w)
      break;
    usleep(1000);
  }
  usleep(20000);
  unsigned long long start = now_ns();
  slow_io();
  unsigned long long end = now_ns();
  send_reply();
  unsigned long long reply_end = now_ns();
  printf("io %d %llu %llu\n", tid(), start, end);
  printf("reply %d %llu %llu\n", tid(), end, reply_end);
  return NULL;
}

int main(int argc, char **argv) {
  // A tracer started with -p gets the time to attach.
  long delay_ms = argc > 1 ? atol(argv[1]) : 300;
  printf("ready %d\n", getpid());
  fflush(stdout);
  usleep((useconds_t)delay_ms * 1000);
  pthread_t request, worker;
  pthread_create(&request, NULL, request_main, NULL);
  pthread_create(&worker, NULL, worker_main, NULL);
  pthread_join(worker, NULL);
  pthread_join(request, NULL);
  fflush(stdout);
  return 0;
}
