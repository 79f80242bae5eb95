// Loads and attaches tools/bench/empty_hook.bpf.o until SIGINT or SIGTERM:
// bench.py's floor, a sched_switch hook that does nothing.
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s EMPTY_HOOK.bpf.o\n", argv[0]);
    return 2;
  }
  struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
  if (!obj || bpf_object__load(obj)) {
    fprintf(stderr, "empty_hook: cannot load %s\n", argv[1]);
    return 1;
  }
  struct bpf_program *prog =
      bpf_object__find_program_by_name(obj, "bench_empty_switch");
  struct bpf_link *link = prog ? bpf_program__attach(prog) : NULL;
  if (!link) {
    fprintf(stderr, "empty_hook: cannot attach to sched_switch\n");
    return 1;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  while (!stop)
    pause();
  bpf_link__destroy(link);
  bpf_object__close(obj);
  return 0;
}
