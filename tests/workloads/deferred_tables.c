// A program that maps two libraries of its own, both built without frame
// pointers: it naps in one (deferred_lib.c) for argv[1] naps of 5 ms and
// never calls the other (nofp_lib.c, linked but unused). A whole-system run
// builds the first's table once a walk reaches it and never the second's
// (tests/integration/deferred_tables_test.cpp).
#include <stdio.h>
#include <stdlib.h>

void dt_lib_loop(int naps);
void nf_lib_block(int fd);

// Referenced, so that the linker keeps the library, never called.
void (*volatile dt_unused)(int) = nf_lib_block;

int main(int argc, char **argv) {
  int naps = argc > 1 ? atoi(argv[1]) : 400;
  printf("ready\n");
  fflush(stdout);
  dt_lib_loop(naps);
  return 0;
}
