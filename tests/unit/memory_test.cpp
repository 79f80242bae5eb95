// limit_heap_growth() as glibc's allocator sees it, in a fresh process (a
// death test, threadsafe style: the test binary run again): the tests
// around it keep the allocator's defaults, and the arenas their threads
// made are not there.
#include <gtest/gtest.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "util/memory.h"

namespace offcpu {
namespace {

// The arenas glibc holds (malloc_info's <heap> elements).
int arenas() {
  char *text = nullptr;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (!f)
    return -1;
  malloc_info(0, f);
  fclose(f);
  int n = 0;
  for (const char *p = text; (p = strstr(p, "<heap nr=")) != nullptr; p++)
    n++;
  free(text);
  return n;
}

// Blocks the compiler cannot leave out: it may drop a malloc whose
// block is never used.
void *volatile sink;

void *allocate(size_t n) {
  sink = malloc(n);
  return sink;
}

// Exit status 0 if both settings hold, else 1; what failed on stderr.
int child() {
  limit_heap_growth();
  // A freed mapped block raises glibc's own threshold to its size: then a
  // 2 MiB block would come from the heap and stay resident once freed.
  void *big = allocate(8 << 20);
  free(big);
  const size_t mapped = mallinfo2().hblkhd;
  void *block = allocate(2 << 20);
  const bool own_mapping = mallinfo2().hblkhd >= mapped + (2 << 20);
  free(block);
  if (!own_mapping) {
    fprintf(stderr, "a 2 MiB block came from the heap\n");
    return 1;
  }
  // A thread's first block comes from the one arena, not one of its own.
  void *kept = nullptr;
  std::thread([&kept] { kept = allocate(64 << 10); }).join();
  const int n = arenas();
  free(kept);
  if (n != 1) {
    fprintf(stderr, "%d arenas after a thread allocated\n", n);
    return 1;
  }
  return 0;
}

TEST(MemoryDeathTest, OneArenaAndLargeBlocksMappedOnTheirOwn) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator is not glibc's";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(_exit(child()), testing::ExitedWithCode(0), "");
}

} // namespace
} // namespace offcpu
