#include "output/folded.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

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

// The kind of one frame after the thread, its annotation stripped from
// `name`; `kernel_side` is set from the "-" of -d on.
FrameKind folded_kind(std::string &name, bool &kernel_side) {
  bool kernel = strip_annotation(name);
  if (name == "-") {
    kernel_side = true;
    return FrameKind::Delimiter;
  }
  if (name.rfind("[Missed", 0) == 0)
    return FrameKind::Marker;
  return kernel || kernel_side ? FrameKind::Kernel : FrameKind::User;
}

Frame folded_frame(std::string name, bool &kernel_side) {
  FrameKind kind = folded_kind(name, kernel_side);
  return {std::move(name), kind, kNoModule, 0};
}

// A line without its line end and trailing blanks.
std::string_view trimmed(std::string_view line) {
  while (!line.empty() &&
         (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  return line;
}

// `field` as a frame name (valid UTF-8, safe for folded text), into `out`
// without allocating once its capacity suffices.
void field_name(std::string_view field, std::string &out) {
  if (is_clean_utf8(field))
    out.assign(field.data(), field.size());
  else
    out = valid_utf8(field);
}

// `s` from `from` on made a folded frame: no ';' (the separator), no line
// breaks or tabs; nothing at all reads "[unknown]".
void fold_from(std::string &s, size_t from) {
  if (s.size() == from) {
    s += "[unknown]";
    return;
  }
  // Most names have none of them: the C library's scan finds that fast.
  // It also stops at a NUL, past which the loop looks on its own.
  for (size_t i = from + std::strcspn(s.c_str() + from, ";\n\r\t");
       i < s.size(); i++) {
    char &c = s[i];
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  }
}

void make_folded_safe(std::string &s) {
  fold_from(s, 0);
}

// Depth-first over a tree without recursion (a folded line may be deep):
// calls visit(node, text) for every node that ends a stack, text being its
// folded line without the value.
template <typename Visit> void each_stack(const StackTree &tree, Visit visit) {
  std::vector<std::pair<uint32_t, size_t>> todo; // node, text length before
  std::string text;
  for (uint32_t c = tree.node(StackTree::kRoot).first_child;
       c != StackTree::kNone; c = tree.node(c).next_sibling)
    todo.emplace_back(c, 0);
  while (!todo.empty()) {
    auto [id, len] = todo.back();
    todo.pop_back();
    const StackTree::Node &n = tree.node(id);
    text.resize(len);
    if (len > 0)
      text += ';';
    text += tree.name(n.name);
    if (len > 0 && n.kind == FrameKind::Kernel)
      text += "_[k]";
    if (n.self_count > 0)
      visit(id, text);
    for (uint32_t c = n.first_child; c != StackTree::kNone;
         c = tree.node(c).next_sibling)
      todo.emplace_back(c, text.size());
  }
}

// The lines by value, largest first, ties by text; those under half a unit
// left out. Handed to `sink` in pieces of about 64 KiB: the text is never
// whole in memory a second time (on a whole-system run it is megabytes,
// and it came at the run's peak RSS, issue #27).
// Lines by value (largest first), then text: the order of the map's own
// iteration does not matter.
using LineValues = std::unordered_map<std::string, uint64_t>;
bool write_sorted_lines(const LineValues &ns_by_line, const TextSink &sink) {
  constexpr size_t kPiece = 64 << 10;
  std::vector<std::pair<uint64_t, const std::string *>> lines;
  for (const auto &[line, ns] : ns_by_line) {
    uint64_t us = (ns + 500) / 1000;
    if (us > 0)
      lines.emplace_back(us, &line);
  }
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  std::string piece;
  for (const auto &[us, line] : lines) {
    piece += *line;
    piece += ' ';
    piece += std::to_string(us);
    piece += '\n';
    if (piece.size() >= kPiece) {
      if (!sink(piece))
        return false;
      piece.clear();
    }
  }
  return piece.empty() || sink(piece);
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
  make_folded_safe(s);
  return s;
}

namespace {

// folded_safe(name) appended to `line`, without a copy of its own.
void append_folded_safe(std::string &line, const std::string &name) {
  const size_t from = line.size();
  line += name;
  fold_from(line, from);
}

} // namespace

bool write_folded(const Profile &profile, const LayoutOptions &layout,
                  const TextSink &sink) {
  // Hashed, not ordered: a whole-system run's lines are long and share
  // long prefixes (a server's root frames), costly to compare.
  LineValues ns_by_line;
  ns_by_line.reserve(profile.samples.size());
  const bool imported = profile.kind == ProfileKind::Folded;
  std::string line;
  for (const Sample &s : profile.samples) {
    for (const LaidOutPart &part : lay_out_parts(s, layout)) {
      line.clear();
      for (const Frame *f : part.frames) {
        if (!line.empty())
          line += ';';
        append_folded_safe(line, f->name);
        // Read back from folded text: keep the kernel mark it may need.
        if (imported && f->kind == FrameKind::Kernel)
          line += "_[k]";
      }
      ns_by_line[line] += part.ns;
    }
  }
  return write_sorted_lines(ns_by_line, sink);
}

std::string render_folded(const Profile &profile, const LayoutOptions &layout) {
  return collect_text([&](const TextSink &sink) {
    return write_folded(profile, layout, sink);
  });
}

Profile read_folded(std::string_view text, size_t *bad_lines,
                    const std::string &unit) {
  Profile p;
  p.kind = ProfileKind::Folded;
  p.folded_unit = unit;
  size_t bad = 0;
  while (!text.empty()) {
    std::string_view line = trimmed(next_line(text));
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

void FoldedReader::feed(std::string_view chunk) {
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    const bool whole = nl != std::string_view::npos;
    std::string_view piece = chunk.substr(0, nl);
    chunk.remove_prefix(whole ? nl + 1 : chunk.size());
    if (skipping_) {
      skipping_ = !whole;
      continue;
    }
    if (carry_.size() + piece.size() > kMaxLine) {
      long_lines++;
      carry_.clear();
      skipping_ = !whole;
      continue;
    }
    if (!whole)
      carry_.append(piece);
    else if (carry_.empty())
      line(piece);
    else {
      carry_.append(piece);
      line(carry_);
      carry_.clear();
    }
  }
}

void FoldedReader::finish() {
  if (!carry_.empty())
    line(carry_);
  carry_.clear();
  skipping_ = false;
}

// As read_folded reads a line, straight into the tree: the names are those
// flame_stacks gives the same line, the value its thousandths' double.
void FoldedReader::line(std::string_view text) {
  text = trimmed(text);
  if (text.empty())
    return;
  std::string_view frames;
  double value = 0;
  if (!split_line(text, frames, value)) {
    bad_lines++;
    return;
  }
  const uint64_t ns = static_cast<uint64_t>(std::llround(value * 1000));
  size_t count =
      1 + static_cast<size_t>(std::count(frames.begin(), frames.end(), ';'));
  if (names_.size() < count)
    names_.resize(count);
  size_t semi = frames.find(';');
  field_name(frames.substr(0, semi), names_[0]);
  make_folded_safe(names_[0]);
  refs_.clear();
  refs_.push_back({names_[0], FrameKind::Thread});
  bool kernel_side = false;
  for (size_t i = 1; semi != std::string_view::npos; i++) {
    frames.remove_prefix(semi + 1);
    semi = frames.find(';');
    field_name(frames.substr(0, semi), names_[i]);
    FrameKind kind = folded_kind(names_[i], kernel_side);
    make_folded_safe(names_[i]);
    refs_.push_back({names_[i], kind});
  }
  if (tree_.add(refs_, static_cast<double>(ns) / 1000.0, ns)) {
    stacks++;
  } else {
    over_budget++;
    over_budget_value += static_cast<double>(ns) / 1000.0;
  }
}

std::string render_folded(const StackTree &tree) {
  // Different stacks can still print alike ("a_[k]" the user frame, "a" the
  // kernel frame): merged as render_folded merges lines.
  LineValues ns_by_line;
  each_stack(tree, [&](uint32_t id, const std::string &text) {
    ns_by_line[text] += tree.node(id).self_ns;
  });
  return collect_text([&](const TextSink &sink) {
    return write_sorted_lines(ns_by_line, sink);
  });
}

Profile folded_profile(const StackTree &tree, const std::string &unit) {
  Profile p;
  p.kind = ProfileKind::Folded;
  p.folded_unit = unit;
  std::vector<uint32_t> path;
  each_stack(tree, [&](uint32_t id, const std::string &) {
    path.clear();
    for (uint32_t n = id; n != StackTree::kRoot; n = tree.node(n).parent)
      path.push_back(n);
    Sample s;
    s.count = tree.node(id).self_count;
    s.total_ns = tree.node(id).self_ns;
    s.comm = tree.name(tree.node(path.back()).name);
    for (size_t i = path.size() - 1; i-- > 0;) {
      const StackTree::Node &n = tree.node(path[i]);
      s.user.push_back({tree.name(n.name), n.kind, kNoModule, 0});
    }
    p.samples.push_back(std::move(s));
  });
  return p;
}

std::vector<FlameStack> parse_folded_stacks(std::string_view text,
                                            size_t *bad_lines) {
  return flame_stacks(read_folded(text, bad_lines), LayoutOptions{});
}

} // namespace offcpu
