/* Prints the size of every BPF program a process holds: its name, the
 * instructions the verifier processed to load it (verified_insns, 5.16+),
 * its instructions as the kernel runs them (xlated, after the verifier's
 * rewrites and dead-code removal) and its JIT image in bytes. For comparing
 * the programs' cost to load and run before and after a change of bpf/
 * (see tools/bench/bpf-prog-sizes.sh).
 *   offcpu_prog_sizes PID */
#include <bpf/bpf.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The id of the BPF program behind fd `name` of process `pid`, or 0. */
static unsigned prog_id_of(const char *pid, const char *name) {
  char path[512], line[256];
  snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, name);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  unsigned id = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "prog_id: %u", &id) == 1)
      break;
  fclose(f);
  return id;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PID\n", argv[0]);
    return 2;
  }
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%s/fdinfo", argv[1]);
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return 1;
  }
  printf("%-24s %14s %8s %8s\n", "program", "verified_insns", "xlated",
         "jited_B");
  struct dirent *e;
  unsigned seen[256];
  unsigned nseen = 0;
  while ((e = readdir(d))) {
    unsigned id = prog_id_of(argv[1], e->d_name);
    if (!id)
      continue;
    /* A program and its link are two descriptors of one program. */
    unsigned i = 0;
    while (i < nseen && seen[i] != id)
      i++;
    if (i < nseen)
      continue;
    if (nseen < sizeof(seen) / sizeof(seen[0]))
      seen[nseen++] = id;
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
      continue;
    struct bpf_prog_info info;
    memset(&info, 0, sizeof(info));
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
      printf("%-24s %14u %8u %8u\n", info.name, info.verified_insns,
             info.xlated_prog_len / 8, info.jited_prog_len);
    close(fd);
  }
  closedir(d);
  return 0;
}
