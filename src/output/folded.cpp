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

FlameFrame folded_frame(std::string name, size_t index) {
  bool kernel = strip_annotation(name);
  FrameKind kind = kernel ? FrameKind::Kernel : FrameKind::User;
  if (index == 0)
    kind = FrameKind::Thread;
  else if (name == "-" || name.rfind("[Missed", 0) == 0)
    kind = FrameKind::Marker;
  return {std::move(name), kind};
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
  for (const Sample &s : profile.samples) {
    std::string line;
    for (const Frame &f : lay_out(s, layout)) {
      if (!line.empty())
        line += ';';
      line += folded_safe(f.name);
    }
    ns_by_line[line] += s.total_ns;
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

std::vector<FlameStack> parse_folded_stacks(std::string_view text,
                                            size_t *bad_lines) {
  std::vector<FlameStack> stacks;
  size_t bad = 0;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    while (!line.empty() &&
           (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.empty())
      continue;
    size_t space = line.find_last_of(" \t");
    std::string value_s(
        space == std::string_view::npos ? "" : line.substr(space + 1));
    char *end = nullptr;
    double value = value_s.empty() ? -1 : std::strtod(value_s.c_str(), &end);
    if (space == std::string_view::npos || space == 0 || !end || *end != '\0' ||
        !(value >= 0) || !std::isfinite(value)) {
      bad++;
      continue;
    }
    FlameStack s;
    s.value = value;
    std::string_view frames = line.substr(0, space);
    for (size_t i = 0;; i++) {
      size_t semi = frames.find(';');
      s.frames.push_back(folded_frame(valid_utf8(frames.substr(0, semi)), i));
      if (semi == std::string_view::npos)
        break;
      frames.remove_prefix(semi + 1);
    }
    stacks.push_back(std::move(s));
  }
  if (bad_lines)
    *bad_lines = bad;
  return stacks;
}

} // namespace offcpu
