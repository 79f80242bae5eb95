#include "run/flamegraph.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "model/stack_tree.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/render.h"
#include "run/outputs.h"
#include "util/error.h"
#include "util/fd.h"

namespace offcpu {
namespace {

constexpr size_t kMaxInput = size_t{1} << 30;

// Devices a person reads from by name: /dev/null, /dev/tty, consoles and
// serial lines (major 4), pseudo terminals (136-143).
bool readable_device(dev_t rdev) {
  unsigned ma = major(rdev), mi = minor(rdev);
  if (ma == 1 || ma == 5)
    return mi == (ma == 1 ? 3u : 0u);
  return ma == 4 || (ma >= 136 && ma <= 143);
}

// Why this kind of file is not read as folded stacks, or "" if it can be:
// regular files, pipes and FIFOs (read as a stream to their end), terminals
// and /dev/null.
// A device other than a terminal never ends (/dev/urandom) or has side
// effects when opened; a directory has no text.
std::string unreadable_kind(const struct stat &st) {
  if (S_ISDIR(st.st_mode))
    return "it is a directory";
  if (S_ISBLK(st.st_mode))
    return "it is a block device";
  if (S_ISCHR(st.st_mode) && !readable_device(st.st_rdev))
    return "it is a character device (" + std::to_string(major(st.st_rdev)) +
           ":" + std::to_string(minor(st.st_rdev)) +
           "); to read from a device, pipe a bounded part of it: head -c SIZE "
           "DEVICE | offcpu flamegraph";
  if (S_ISSOCK(st.st_mode))
    return "it is a socket";
  return "";
}

// Opens `path` for reading, checking what it is before opening it (opening
// a device or a FIFO can act or wait).
UniqueFd open_input(const std::string &path) {
  UniqueFd probe(::open(path.c_str(), O_PATH | O_CLOEXEC));
  struct stat st {};
  if (!probe || fstat(probe.get(), &st) != 0)
    throw usage_error("cannot read " + path + ": " + errno_text(errno));
  std::string why = unreadable_kind(st);
  if (!why.empty())
    throw usage_error("cannot read " + path + ": " + why);
  // The inode just checked, not whatever the name leads to now; a FIFO
  // waits here for its writer.
  std::string self = "/proc/self/fd/" + std::to_string(probe.get());
  UniqueFd fd(::open(self.c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC));
  if (!fd && errno == ENOENT) { // no /proc: by name, checked again
    fd.reset(::open(path.c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC));
    if (fd && (fstat(fd.get(), &st) != 0 || !unreadable_kind(st).empty()))
      throw usage_error("cannot read " + path + ": it changed while opened");
  }
  if (!fd)
    throw usage_error("cannot read " + path + ": " + errno_text(errno));
  return fd;
}

// Everything up to EOF, at most kMaxInput bytes, fed to `reader` a chunk
// at a time: a FIFO or stdin is a stream with no size to check first.
void read_into(int fd, const std::string &name, FoldedReader &reader) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    throw usage_error("cannot read " + name + ": " + errno_text(errno));
  std::string why = unreadable_kind(st);
  if (!why.empty())
    throw usage_error("cannot read " + name + ": " + why);
  const std::string too_large = "cannot read " + name +
                                ": larger than 1 GiB, the limit for folded "
                                "input; merge or filter it first";
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxInput)
    throw usage_error(too_large);
  std::vector<char> buf(size_t{1} << 18);
  size_t total = 0;
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw runtime_error("cannot read " + name + ": " + errno_text(errno));
    if (n == 0)
      break;
    total += static_cast<size_t>(n);
    if (total > kMaxInput)
      throw usage_error(too_large);
    reader.feed({buf.data(), static_cast<size_t>(n)});
  }
  reader.finish();
}

// What the reader could not keep, one line per cause, with what to do.
void report_skipped(const FoldedReader &r, const std::string &unit,
                    size_t max_nodes) {
  if (r.bad_lines)
    fprintf(stderr,
            "offcpu: warning: skipped %zu lines that are not folded stacks\n",
            r.bad_lines);
  if (r.long_lines)
    fprintf(stderr,
            "offcpu: warning: skipped %zu lines longer than %zu bytes, the "
            "limit for one folded stack; shorten them first (e.g. cut "
            "frames)\n",
            r.long_lines, FoldedReader::kMaxLine);
  if (r.over_budget)
    fprintf(stderr,
            "offcpu: warning: skipped %zu stacks (%.0f %s) once the merged "
            "stacks held %zu frames, the limit for folded input; merge or "
            "filter the input first (e.g. grep for the threads wanted)\n",
            r.over_budget, r.over_budget_value, unit.c_str(), max_nodes);
}

} // namespace

int run_flamegraph(const FlamegraphOptions &opts) {
  Outputs outputs(opts.output); // before reading: a bad -o fails first
  StackTree tree;
  FoldedReader reader(tree);
  if (opts.input)
    read_into(open_input(*opts.input).get(), *opts.input, reader);
  else
    read_into(STDIN_FILENO, "stdin", reader);
  const size_t skipped = reader.bad_lines + reader.long_lines;
  if (reader.stacks == 0 && reader.over_budget == 0 && skipped > 0)
    throw usage_error("no folded stacks in the input (" +
                      std::to_string(skipped) +
                      " lines not of the form 'frame;frame;... value'" +
                      (reader.long_lines ? " or longer than 1 MiB" : "") + ")");
  report_skipped(reader, opts.count_name, StackTree::kDefaultMaxNodes);

  // Each format from the tree; pprof from a model of its distinct stacks.
  const RenderOptions r = render_options(opts.output);
  std::optional<Profile> profile;
  for (size_t i = 0; i < outputs.size(); i++) {
    std::string bytes;
    if (outputs.format(i) == OutputFormat::Svg) {
      FlameGraphOptions g;
      g.title = !r.title.empty() ? r.title : "Flame Graph";
      g.count_name = opts.count_name;
      g.width = r.width;
      g.min_width = r.min_width;
      bytes = render_flamegraph(tree, g);
    } else if (outputs.format(i) == OutputFormat::Folded) {
      bytes = render_folded(tree);
    } else {
      if (!profile)
        profile = folded_profile(tree, opts.count_name);
      bytes = render(*profile, outputs.format(i), r);
    }
    if (outputs.file(i).write(bytes) != WriteResult::Ok)
      return kExitOk; // stdout's reader went away: nothing more to write
  }
  outputs.commit();
  return kExitOk;
}

} // namespace offcpu
