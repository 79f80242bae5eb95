// A thread that blocks at one place over and over with a different value
// in rbp each time, as code built without frame pointers does (rbp is then
// an ordinary callee-saved register): at the system call, and saved in the
// frame of the function that blocks. Neither is used to find the callers,
// so the thread's last stack is to be reused (bpf/user_unwind.bpf.h,
// uw_bp_used); a memo that checked them walked every time. Built without
// frame pointers. Prints "ready PID" once the thread runs.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
// Keeps a call from being a tail call, so each function keeps its frame.
#define KEEP() __asm__ volatile("" ::: "memory")

// Sleeps 1 ms with `v` in rbp at the system call (saved and restored
// around it by the compiler, and described in the unwind tables).
NOINLINE void churn_block(unsigned long v) {
  struct timespec ts = {0, 1000000};
  long ret;
  __asm__ volatile("mov %[v], %%rbp\n\tsyscall"
                   : "=a"(ret)
                   : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0), [v] "r"(v)
                   : "rbp", "rcx", "r11", "memory");
  (void)ret;
  KEEP();
}

// Puts another value in rbp, which churn_block saves in its frame.
NOINLINE void churn_step(unsigned long i) {
  __asm__ volatile("mov %0, %%rbp" ::"r"(i * 7 + 1) : "rbp");
  churn_block(i);
  KEEP();
}

static void *churn(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, "churn");
  for (unsigned long i = 1;; i++)
    churn_step(i);
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, churn, NULL))
    return 1;
  usleep(100000);
  printf("ready %d\n", getpid());
  fflush(stdout);
  pthread_join(t, NULL);
  return 0;
}
