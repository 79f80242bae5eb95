// Waits of a known kind, for the --runqueue and --state tests.
//   waits runq     on CPU 0: "victim" (nice 19) blocks on a pipe that
//                  "waker" (SCHED_FIFO) writes every 3 ms and then keeps
//                  the CPU for 1 ms, while two "hog" threads keep it busy
//                  too, so the victim waits for the CPU after each
//                  wakeup. A "logger" thread on CPU 1 samples the victim's
//                  /proc/self/task/TID/schedstat (run_delay, the kernel's
//                  own run-queue time, and its time on CPU) every 5 ms,
//                  beside the victim's own count of its blocked time (from
//                  entering each read to the write that ended it); on
//                  SIGUSR1 the samples are printed as "TIME_NS
//                  RUN_DELAY_NS ON_CPU_NS BLOCKED_NS", then "end".
//   waits vfork    "vforker" vforks in a loop; the child sleeps 50 ms and
//                  exits while the parent waits in D state (vfork waits
//                  uninterruptibly) inside wait_in_vfork().
// Prints "ready PID VICTIM_TID" (runq) or "ready PID" (vfork).
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAX_SAMPLES 20000

static int pipe_fds[2];
static atomic_int victim_tid;
static volatile sig_atomic_t dump;
static unsigned long long samples[MAX_SAMPLES][4];
// When the waker wrote each byte (by its number, modulo), and the victim's
// sum of the time from entering each read that blocked to the write of the
// byte that ended it: with its time on CPU, what is left of a window is
// its true run-queue time, whatever the kernel's run_delay says (under
// load 6.18's ran ahead of it, even past the window).
#define STAMPS 4096
static atomic_ullong written_at[STAMPS];
static atomic_ullong own_blocked;
static atomic_int nsamples;

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

NOINLINE void victim_read(void) {
  char c;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(SYS_read), "D"(pipe_fds[0]), "S"(&c), "d"(1)
                   : "rcx", "r11", "memory");
  (void)ret;
}

static void *victim_main(void *arg) {
  (void)arg;
  pin(0);
  pthread_setname_np(pthread_self(), "victim");
  // The lowest weight: after each wakeup the hogs keep the CPU for a while,
  // so most of the victim's waiting is for the CPU (milliseconds), not the
  // microseconds a wakeup takes.
  setpriority(PRIO_PROCESS, 0, 19);
  atomic_store(&victim_tid, (int)syscall(SYS_gettid));
  for (unsigned long long got = 0;; got++) {
    unsigned long long entered = now_ns();
    victim_read();
    // A byte written after the read began: the read blocked until then.
    unsigned long long w = atomic_load(&written_at[got % STAMPS]);
    if (w > entered)
      atomic_fetch_add(&own_blocked, w - entered);
  }
  return NULL;
}

NOINLINE void wake_victim(void) {
  ssize_t n = write(pipe_fds[1], "x", 1);
  (void)n;
}

// Real-time, and it keeps the CPU for 1 ms after each wakeup it makes: the
// victim waits for the CPU at least that long whatever the fair scheduler
// decides (on some kernels a nice 19 task woken beside the hogs preempts
// them at once, and hardly waits at all).
static void *waker_main(void *arg) {
  (void)arg;
  pin(0);
  pthread_setname_np(pthread_self(), "waker");
  struct sched_param fifo = {.sched_priority = 1};
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo);
  struct timespec ts = {0, 2000000};
  for (unsigned long long sent = 0;; sent++) {
    nanosleep(&ts, NULL);
    atomic_store(&written_at[sent % STAMPS], now_ns());
    wake_victim();
    unsigned long long until = now_ns() + 1000000;
    while (now_ns() < until)
      ;
  }
  return NULL;
}

static void *hog_main(void *arg) {
  (void)arg;
  pin(0);
  pthread_setname_np(pthread_self(), "hog");
  volatile unsigned long x = 0;
  for (;;)
    x++;
  return NULL;
}

// The victim's run_delay and time on CPU (schedstat's second and first
// fields) and its own count of its blocked time, every 5 ms.
static void *logger_main(void *arg) {
  (void)arg;
  pin(1);
  pthread_setname_np(pthread_self(), "logger");
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat",
           atomic_load(&victim_tid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct timespec ts = {0, 5000000};
  for (;;) {
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    unsigned long long t = now_ns();
    if (n > 0) {
      buf[n] = 0;
      unsigned long long on_cpu = 0, delay = 0;
      int i = atomic_load(&nsamples);
      if (sscanf(buf, "%llu %llu", &on_cpu, &delay) == 2 && i < MAX_SAMPLES) {
        samples[i][0] = t;
        samples[i][1] = delay;
        samples[i][2] = on_cpu;
        samples[i][3] = atomic_load(&own_blocked);
        atomic_store(&nsamples, i + 1);
      }
    }
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void on_usr1(int sig) {
  (void)sig;
  dump = 1;
}

static int run_queue_mode(void) {
  if (pipe(pipe_fds))
    return 1;
  signal(SIGUSR1, on_usr1);
  pthread_t t;
  pthread_create(&t, NULL, victim_main, NULL);
  while (!atomic_load(&victim_tid))
    usleep(1000);
  pthread_create(&t, NULL, waker_main, NULL);
  pthread_create(&t, NULL, hog_main, NULL);
  pthread_create(&t, NULL, hog_main, NULL);
  pthread_create(&t, NULL, logger_main, NULL);
  printf("ready %d %d\n", getpid(), atomic_load(&victim_tid));
  fflush(stdout);
  while (!dump)
    pause();
  int n = atomic_load(&nsamples);
  for (int i = 0; i < n; i++)
    printf("%llu %llu %llu %llu\n", samples[i][0], samples[i][1], samples[i][2],
           samples[i][3]);
  printf("end\n");
  fflush(stdout);
  _exit(0);
}

// vfork as an inline system call, from here: glibc's wrapper has no frame
// pointer, and a walk through it would lose this function. The child runs
// on this very stack frame until it exits (the parent is suspended).
NOINLINE void wait_in_vfork(void) {
  long pid;
  __asm__ volatile("syscall"
                   : "=a"(pid)
                   : "a"(SYS_vfork)
                   : "rcx", "r11", "memory");
  if (pid == 0) {
    struct timespec ts = {0, 50000000};
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(SYS_nanosleep), "D"(&ts), "S"(0)
                     : "rcx", "r11", "memory");
    __asm__ volatile("syscall" : : "a"(SYS_exit), "D"(0) : "rcx", "r11");
    __builtin_unreachable();
  }
  __asm__ volatile("" ::: "memory");
}

static int vfork_mode(void) {
  pthread_setname_np(pthread_self(), "vforker");
  printf("ready %d\n", getpid());
  fflush(stdout);
  for (;;)
    wait_in_vfork();
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "runq") == 0)
    return run_queue_mode();
  if (argc == 2 && strcmp(argv[1], "vfork") == 0)
    return vfork_mode();
  fprintf(stderr, "usage: waits runq|vfork\n");
  return 2;
}
