// Two threads that block with known, different mixes of wait lengths, for
// the tests of the latency distribution per stack (text, pprof, SVG).
//   latency_mix TRUTH_FILE
// Thread "mixA" sleeps in wait_mixed(): 1000 x 1.5 ms with 20 x 48 ms
// among them (every 50th); thread "steadyB" sleeps in wait_steady():
// 200 x 6 ms. The lengths sit mid-bucket on the log2 microsecond scale
// ([1024, 2048), [32768, 65536), [4096, 8192)), so timer slack and wake-up
// latency do not move a wait to the next bucket. Each thread measures
// every wait itself (CLOCK_MONOTONIC around the system call) and, when
// both are done, the main thread writes to TRUTH_FILE one line per thread:
//   COMM TID waits N max_ns M hist B:N B:N ...
// (B a log2 bucket of microseconds, as offcpu counts them), then exits.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BUCKETS 32

struct plan {
  const char *comm;
  int waits;
  long short_us, long_us;
  int long_every; // every Nth wait is long (0: none)
  pid_t tid;
  unsigned long long max_ns;
  unsigned long long hist[BUCKETS];
  int done;
};

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int bucket_of(unsigned long long ns) {
  unsigned long long us = ns / 1000;
  int b = 0;
  while (us > 1) {
    us >>= 1;
    b++;
  }
  return b < BUCKETS ? b : BUCKETS - 1;
}

// The system call inline, so that the user stack is exact: the caller's
// frame is the function that waits.
static inline void sleep_us(struct plan *p, long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  unsigned long long start = now_ns();
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                   : "rcx", "r11", "memory");
  (void)ret;
  unsigned long long d = now_ns() - start;
  p->hist[bucket_of(d)]++;
  if (d > p->max_ns)
    p->max_ns = d;
}

NOINLINE void wait_mixed(struct plan *p) {
  for (int i = 1; i <= p->waits; i++)
    sleep_us(p, p->long_every && i % p->long_every == 0 ? p->long_us
                                                        : p->short_us);
}

NOINLINE void wait_steady(struct plan *p) {
  for (int i = 0; i < p->waits; i++)
    sleep_us(p, p->short_us);
}

static void *run(void *arg) {
  struct plan *p = arg;
  p->tid = (pid_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), p->comm);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (p->long_every)
    wait_mixed(p);
  else
    wait_steady(p);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: latency_mix TRUTH_FILE\n");
    return 2;
  }
  static struct plan plans[2] = {
      {"mixA", 1020, 1500, 48000, 51, 0, 0, {0}, 0},
      {"steadyB", 200, 6000, 0, 0, 0, 0, {0}, 0},
  };
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, run, &plans[i])) {
      perror("pthread_create");
      return 1;
    }
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  FILE *f = fopen(argv[1], "w");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  for (int i = 0; i < 2; i++) {
    struct plan *p = &plans[i];
    unsigned long long n = 0;
    for (int b = 0; b < BUCKETS; b++)
      n += p->hist[b];
    fprintf(f, "%s %d waits %llu max_ns %llu hist", p->comm, p->tid, n,
            p->max_ns);
    for (int b = 0; b < BUCKETS; b++)
      if (p->hist[b])
        fprintf(f, " %d:%llu", b, p->hist[b]);
    fprintf(f, "\n");
  }
  fclose(f);
  return 0;
}
