#include "output/folded.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "model/layout.h"
#include "util/parse.h"
#include "util/utf8.h"

namespace offcpu {
namespace {

// flamegraph.pl annotations: _[k] kernel, _[j] JIT, _[i] inlined, _[w]
// waker. Strips one; true for a kernel frame.
bool strip_annotation(std::string &name) {
  if (name.size() > 4 && name[name.size() - 4] == '_' &&
      name[name.size() - 3] == '[' && name.back() == ']') {
    char a = name[name.size() - 2];
    name.resize(name.size() - 4);
    return a == 'k';
  }
  return false;
}

// One frame after the thread; `kernel_side` is set from the "-" of -d on.
Frame folded_frame(std::string name, bool &kernel_side) {
  bool kernel = strip_annotation(name);
  if (name == "-") {
    kernel_side = true;
    return {std::move(name), FrameKind::Delimiter, kNoModule, 0};
  }
  if (name.rfind("[Missed", 0) == 0)
    return {std::move(name), FrameKind::Marker, kNoModule, 0};
  FrameKind kind = kernel || kernel_side ? FrameKind::Kernel : FrameKind::User;
  return {std::move(name), kind, kNoModule, 0};
}

// "frames value" with a value a flame graph can draw, or false.
bool split_line(std::string_view line, std::string_view &frames,
                double &value) {
  size_t space = line.find_last_of(" \t");
  if (space == std::string_view::npos || space == 0)
    return false;
  std::string value_s(line.substr(space + 1));
  char *end = nullptr;
  value = value_s.empty() ? -1 : std::strtod(value_s.c_str(), &end);
  // Kept in thousandths in 64 bits: anything near 1.8e16 units is junk.
  if (!end || *end != '\0' || !(value >= 0) || !(value < 1e15))
    return false;
  frames = line.substr(0, space);
  return true;
}

} // namespace

std::string folded_safe(const std::string &name) {
  std::string s = name;
  for (char &c : s) {
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  }
  if (s.empty())
    s = "[unknown]";
  return s;
}

std::string render_folded(const Profile &profile, const LayoutOptions &layout) {
  std::map<std::string, uint64_t> ns_by_line;
  const bool imported = profile.kind == ProfileKind::Folded;
  for (const Sample &s : profile.samples) {
    for (const LaidOutPart &part : lay_out_parts(s, layout)) {
      std::string line;
      for (const Frame &f : part.frames) {
        if (!line.empty())
          line += ';';
        line += folded_safe(f.name);
        // Read back from folded text: keep the kernel mark it may need.
        if (imported && f.kind == FrameKind::Kernel)
          line += "_[k]";
      }
      ns_by_line[line] += part.ns;
    }
  }
  std::vector<std::pair<uint64_t, const std::string *>> lines;
  for (const auto &[line, ns] : ns_by_line) {
    uint64_t us = (ns + 500) / 1000;
    if (us > 0)
      lines.emplace_back(us, &line);
  }
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  std::string out;
  for (const auto &[us, line] : lines)
    out += *line + " " + std::to_string(us) + "\n";
  return out;
}

Profile read_folded(std::string_view text, size_t *bad_lines,
                    const std::string &unit) {
  Profile p;
  p.kind = ProfileKind::Folded;
  p.folded_unit = unit;
  size_t bad = 0;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    while (!line.empty() &&
           (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.empty())
      continue;
    std::string_view frames;
    double value = 0;
    if (!split_line(line, frames, value)) {
      bad++;
      continue;
    }
    Sample s;
    s.count = 1;
    s.total_ns = static_cast<uint64_t>(std::llround(value * 1000));
    size_t semi = frames.find(';');
    s.comm = valid_utf8(frames.substr(0, semi));
    bool kernel_side = false;
    while (semi != std::string_view::npos) {
      frames.remove_prefix(semi + 1);
      semi = frames.find(';');
      // Everything after the thread goes in `user`, kinds kept: lay_out
      // then draws the line as it was.
      s.user.push_back(
          folded_frame(valid_utf8(frames.substr(0, semi)), kernel_side));
    }
    p.samples.push_back(std::move(s));
  }
  if (bad_lines)
    *bad_lines = bad;
  return p;
}

std::vector<FlameStack> parse_folded_stacks(std::string_view text,
                                            size_t *bad_lines) {
  return flame_stacks(read_folded(text, bad_lines), LayoutOptions{});
}

} // namespace offcpu
