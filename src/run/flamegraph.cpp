#include "run/flamegraph.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "output/folded.h"
#include "run/outputs.h"
#include "util/error.h"
#include "util/fs.h"

namespace offcpu {
namespace {

constexpr size_t kMaxInput = size_t{1} << 30;

std::string read_stdin() {
  std::string in;
  char buf[65536];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw runtime_error(std::string("cannot read stdin: ") +
                          std::strerror(errno));
    if (n == 0)
      break;
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > kMaxInput)
      throw usage_error("input larger than 1 GiB");
  }
  return in;
}

} // namespace

int run_flamegraph(const FlamegraphOptions &opts) {
  Outputs outputs(opts.output); // before reading: a bad -o fails first
  std::string text;
  if (opts.input) {
    auto content = system_files().read(*opts.input, kMaxInput);
    if (!content)
      throw usage_error("cannot read " + *opts.input + ": " +
                        std::strerror(errno));
    text = std::move(*content);
  } else {
    text = read_stdin();
  }
  size_t bad = 0;
  Profile profile = read_folded(text, &bad, opts.count_name);
  if (profile.samples.empty() && bad > 0)
    throw usage_error("no folded stacks in the input (" + std::to_string(bad) +
                      " lines not of the form 'frame;frame;... value')");
  if (bad)
    fprintf(stderr,
            "offcpu: warning: skipped %zu lines that are not folded stacks\n",
            bad);
  outputs.write_all(profile);
  return kExitOk;
}

} // namespace offcpu
