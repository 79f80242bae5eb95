#include "util/messages.h"

#include <cstdio>

namespace offcpu {

void note(const std::string &line) {
  fprintf(stderr, "offcpu: %s\n", line.c_str());
}

void warn(const std::string &line) {
  fprintf(stderr, "offcpu: warning: %s\n", line.c_str());
}

} // namespace offcpu
