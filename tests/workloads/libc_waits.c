// Threads that block inside glibc's versioned functions, for the names
// test: "clksleep" in clock_nanosleep, "condwait" in pthread_cond_wait.
// Prints "ready PID" once both run; exits when stdin closes.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *sleeper(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "clksleep");
  struct timespec ts = {0, 50 * 1000 * 1000};
  for (;;)
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
  return NULL;
}

static void *waiter(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "condwait");
  pthread_mutex_lock(&lock);
  for (;;)
    pthread_cond_wait(&never, &lock);
  return NULL;
}

int main(void) {
  pthread_t a, b;
  pthread_create(&a, NULL, sleeper, NULL);
  pthread_create(&b, NULL, waiter, NULL);
  usleep(100 * 1000);
  printf("ready %d\n", getpid());
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0)
    ;
  return 0;
}
