// Writes the CFI fuzzer's seeds: the hostile shapes of issue #26 as small
// ELF files (and their .eh_frame alone), into the directory given.
#include <cstdio>
#include <fstream>

#include "support/hostile_cfi.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_cfi_seeds DIR\n");
    return 2;
  }
  for (const auto &[name, bytes] : offcpu::test::cfi_seed_shapes()) {
    std::ofstream out(std::string(argv[1]) + "/" + name, std::ios::binary);
    out << bytes;
    if (!out)
      return 1;
  }
  return 0;
}
