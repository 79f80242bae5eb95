#include "output/flamegraph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "flamegraph_script.h"
#include "model/layout.h"
#include "output/folded.h"
#include "util/utf8.h"

namespace offcpu {
namespace {

constexpr int kFrameHeight = 16;
constexpr int kFontSize = 12;
constexpr double kFontWidth = 0.59; // average glyph width / font size
constexpr int kPad = 10;
constexpr int kTop = 56; // title, buttons and details
constexpr int kBottom = 24;

enum class Kind { User, Kernel, Comm, Marker, Lock, Root, Waker, Python };

// A box to draw: a node of the tree, or the [truncated] frame that stands
// for everything deeper than StackTree::kMaxDrawnFrames.
struct Node {
  const std::string *name;
  Kind kind = Kind::User;
  double value = 0;
  uint32_t id = StackTree::kNone; // kNone: [truncated], no children
};

Kind kind_of(FrameKind k) {
  switch (k) {
  case FrameKind::Kernel:
    return Kind::Kernel;
  case FrameKind::Thread:
  case FrameKind::Group:
    return Kind::Comm;
  case FrameKind::Marker:
  case FrameKind::Delimiter:
  case FrameKind::Annotation:
  case FrameKind::WakerDelimiter:
    return Kind::Marker;
  case FrameKind::Waker:
    return Kind::Waker;
  case FrameKind::Lock:
    return Kind::Lock;
  case FrameKind::Python:
    return Kind::Python;
  case FrameKind::User:
    break;
  }
  return Kind::User;
}

uint32_t name_hash(const std::string &s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s)
    h = (h ^ c) * 16777619u;
  return h;
}

// The "io" palette: blues for user code, teal for the kernel.
std::string color(const Node &n) {
  double v = static_cast<double>(name_hash(*n.name) % 1000) / 1000.0;
  int r, g, b;
  switch (n.kind) {
  case Kind::Kernel:
    r = 40 + static_cast<int>(v * 50), g = 150 + static_cast<int>(v * 60),
    b = 150 + static_cast<int>(v * 50);
    break;
  case Kind::Comm:
    r = 150 + static_cast<int>(v * 40), g = 150 + static_cast<int>(v * 40),
    b = 200 + static_cast<int>(v * 40);
    break;
  case Kind::Marker:
    r = g = b = 190 + static_cast<int>(v * 30);
    break;
  case Kind::Waker: // the waker's part (--wakers): green, apart from the rest
    r = 90 + static_cast<int>(v * 50), g = 175 + static_cast<int>(v * 50),
    b = 90 + static_cast<int>(v * 40);
    break;
  case Kind::Python: // Python code (issue #32): yellow, apart from C
    r = 215 + static_cast<int>(v * 35), g = 195 + static_cast<int>(v * 40),
    b = 60 + static_cast<int>(v * 40);
    break;
  case Kind::Root: // "all": the whole, neutral
    r = 200, g = 200, b = 215;
    break;
  case Kind::Lock: // what was waited for stands out: warm
    r = 225 + static_cast<int>(v * 25), g = 140 + static_cast<int>(v * 50),
    b = 60 + static_cast<int>(v * 30);
    break;
  default:
    r = 80 + static_cast<int>(v * 60), g = 130 + static_cast<int>(v * 60),
    b = 205 + static_cast<int>(v * 50);
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," +
         std::to_string(b) + ")";
}

std::string fmt(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// Whole units (microseconds, samples): a fraction of one says nothing at
// this scale, except for a frame under one unit.
std::string count_text(double v) {
  char buf[32];
  if (v >= 1 || v == 0)
    snprintf(buf, sizeof(buf), "%.0f", std::round(v));
  else
    snprintf(buf, sizeof(buf), "%.2f", v);
  // Thousands separators make large microsecond counts readable.
  std::string s = buf, out;
  size_t dot = s.find('.');
  size_t int_len = dot == std::string::npos ? s.size() : dot;
  for (size_t i = 0; i < s.size(); i++) {
    if (i > 0 && i < int_len && (int_len - i) % 3 == 0)
      out += ',';
    out += s[i];
  }
  return out;
}

const std::string kTruncated = "[truncated]";

Kind node_kind(const StackTree::Node &n, int depth) {
  if (depth == 0)
    return Kind::Root;
  return depth == 1 ? Kind::Comm : kind_of(n.kind);
}

// A node's children with a value, in the order they are drawn: by name, a
// kernel frame after a user frame of the same name.
std::vector<Node> children(const StackTree &tree, const Node &n, int depth) {
  std::vector<Node> out;
  if (n.id == StackTree::kNone)
    return out;
  // The tree holds every frame; the drawing stops at kMaxDrawnFrames.
  if (static_cast<size_t>(depth) + 1 == StackTree::kMaxDrawnFrames) {
    double v = tree.truncated_value(n.id);
    if (v > 0)
      out.push_back({&kTruncated, Kind::User, v, StackTree::kNone});
    return out;
  }
  std::vector<std::pair<std::string, Node>> keyed;
  for (uint32_t c = tree.node(n.id).first_child; c != StackTree::kNone;
       c = tree.node(c).next_sibling) {
    const StackTree::Node &child = tree.node(c);
    if (!(child.value > 0))
      continue;
    Node box{&tree.name(child.name), node_kind(child, depth + 1), child.value,
             c};
    keyed.emplace_back(*box.name + (box.kind == Kind::Kernel ? "\x01k" : ""),
                       box);
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  out.reserve(keyed.size());
  for (auto &k : keyed)
    out.push_back(k.second);
  return out;
}

std::string us_text(uint64_t ns) {
  return count_text(static_cast<double>((ns + 500) / 1000)) + " us";
}

// A frame's distribution, after its name and value in the tooltip: a line
// of totals and quantiles (estimates at the histogram's resolution, ~),
// and a line of the non-empty log2 buckets, [low, high) in microseconds.
// No " (" in them: the script takes the name from the title up to the
// last one.
std::string latency_text(const Latency &l) {
  std::string out = "\n" + count_text(static_cast<double>(l.waits)) +
                    (l.waits == 1 ? " wait" : " waits") + ", max " +
                    us_text(l.max_ns);
  if (l.waits > 1)
    out += ", p50 ~" + us_text(l.quantile_ns(0.5)) + ", p99 ~" +
           us_text(l.quantile_ns(0.99));
  out += "\nus:";
  for (size_t b = 0; b < Latency::kBuckets; b++) {
    if (!l.bucket(b))
      continue;
    const uint64_t high = Latency::high_ns(b);
    out += " [" + std::to_string(Latency::low_ns(b) / 1000) + "," +
           (high == UINT64_MAX ? std::string("inf")
                               : std::to_string(high / 1000)) +
           ") " + std::to_string(l.bucket(b));
  }
  return out;
}

// The latency of every drawn frame's subtree: each node's own stacks' and
// its children's, summed after the children (one pass over the tree, one
// distribution per level on the call stack); only drawn frames keep theirs.
struct LatencyOfFrames {
  const StackTree &tree;
  const std::unordered_map<uint32_t, Latency> &leaves;
  double scale, min_width;
  std::unordered_map<uint32_t, Latency> drawn;

  Latency sum(uint32_t id) {
    Latency l;
    if (auto it = leaves.find(id); it != leaves.end())
      l = it->second;
    const StackTree::Node &n = tree.node(id);
    for (uint32_t c = n.first_child; c != StackTree::kNone;
         c = tree.node(c).next_sibling)
      l.add(sum(c));
    if (!l.empty() && n.value * scale >= min_width)
      drawn.emplace(id, l);
    return l;
  }
};

struct Renderer {
  const StackTree &tree;
  const FlameGraphOptions &o;
  double total;
  double scale; // pixels per unit of value
  int height;
  std::string out;
  const std::unordered_map<uint32_t, Latency> *latency = nullptr;

  void frame(const Node &n, double offset, int depth) {
    double w = n.value * scale;
    if (w < o.min_width)
      return;
    double x = kPad + offset * scale;
    double y = height - kBottom - (depth + 1) * kFrameHeight;
    const bool inlined = n.id != StackTree::kNone && tree.node(n.id).inlined;
    std::string title = xml_escape(
        *n.name + (inlined ? " [inlined]" : "") + " (" + count_text(n.value) +
        " " + o.count_name + ", " + fmt(100.0 * n.value / total) + "%)");
    // Lines of their own (escaping would make the newlines spaces).
    if (latency && n.id != StackTree::kNone)
      if (auto it = latency->find(n.id); it != latency->end())
        title += latency_text(it->second);
    out += "<g class=\"f\" data-o=\"" + fmt(offset) + "\" data-v=\"" +
           fmt(n.value) + "\" data-d=\"" + std::to_string(depth) +
           "\"><title>" + title + "</title><rect x=\"" + fmt(x) + "\" y=\"" +
           fmt(y) + "\" width=\"" + fmt(w) + "\" height=\"" +
           std::to_string(kFrameHeight - 1) + "\" rx=\"2\" fill=\"" + color(n) +
           "\"/><text x=\"" + fmt(x + 3) + "\" y=\"" +
           fmt(y + kFrameHeight - 4.5) + "\">" + xml_escape(fit(*n.name, w)) +
           "</text></g>\n";
    double child_offset = offset;
    for (const Node &child : children(tree, n, depth)) {
      frame(child, child_offset, depth + 1);
      child_offset += child.value;
    }
  }

  static std::string fit(const std::string &name, double width) {
    size_t chars = static_cast<size_t>((width - 6) / (kFontSize * kFontWidth));
    if (chars < 3)
      return "";
    if (utf8_length(name) <= chars)
      return name;
    return std::string(utf8_prefix(name, chars - 2)) + "..";
  }
};

// How deep the drawn frames go: a tower too narrow to draw takes no height.
int depth_of(const StackTree &tree, const Node &n, int depth, double scale,
             double min_width) {
  int d = 0;
  for (const Node &c : children(tree, n, depth))
    if (c.value * scale >= min_width)
      d = std::max(d, 1 + depth_of(tree, c, depth + 1, scale, min_width));
  return d;
}

// The document's head: style, script, background.
std::string svg_head(int width, int height) {
  std::string o;
  o += "<?xml version=\"1.0\" standalone=\"no\"?>\n";
  o += "<svg version=\"1.1\" width=\"" + std::to_string(width) +
       "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
       std::to_string(width) + " " + std::to_string(height) +
       "\" xmlns=\"http://www.w3.org/2000/svg\" "
       "xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n";
  o +=
      "<style>text{font-family:Verdana,sans-serif;font-size:" +
      std::to_string(kFontSize) +
      "px;fill:#000}g.f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
      ".hide{display:none}.parent{opacity:0.5}#title{font-size:17px}"
      ".button{cursor:pointer;fill:#333}.button:hover{fill:#000;text-"
      "decoration:underline}"
      "</style>\n";
  o += "<script type=\"text/ecmascript\"><![CDATA[";
  o += kFlameGraphScript;
  o += "]]></script>\n";
  // The whole graph's height, not 100%: the script may show a slice.
  o += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"" +
       std::to_string(height) + "\" fill=\"#f4f6fa\"/>\n";
  return o;
}

// Title and buttons, details and matches: drawn last, over the frames, in
// groups the script keeps on screen while a graph taller than the window
// is scrolled.
std::string svg_tail(int width, int height, const std::string &title) {
  std::string o = "<g id=\"head\"><rect width=\"100%\" height=\"34\" "
                  "fill=\"#f4f6fa\" fill-opacity=\"0.92\"/>";
  o += "<text id=\"title\" x=\"" + std::to_string(width / 2) +
       "\" y=\"24\" text-anchor=\"middle\">" + xml_escape(title) + "</text>";
  o += "<text id=\"unzoom\" class=\"button hide\" x=\"" + std::to_string(kPad) +
       "\" y=\"24\">Reset Zoom</text>";
  o += "<text id=\"search\" class=\"button\" x=\"" +
       std::to_string(width - kPad) +
       "\" y=\"24\" text-anchor=\"end\">Search</text></g>\n";
  o += "<g id=\"foot\"><rect y=\"" + std::to_string(height - kBottom) +
       "\" width=\"100%\" height=\"" + std::to_string(kBottom) +
       "\" fill=\"#f4f6fa\" fill-opacity=\"0.92\"/>";
  o += "<text id=\"details\" x=\"" + std::to_string(kPad) + "\" y=\"" +
       std::to_string(height - 8) + "\"> </text>";
  o += "<text id=\"matched\" x=\"" + std::to_string(width - kPad) + "\" y=\"" +
       std::to_string(height - 8) + "\" text-anchor=\"end\"> </text></g>\n";
  return o;
}

} // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      // XML 1.0 forbids most control characters, even escaped.
      out += (static_cast<unsigned char>(c) < 0x20 && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

std::vector<FlameStack> flame_stacks(const Profile &profile,
                                     const LayoutOptions &layout) {
  std::vector<FlameStack> out;
  out.reserve(profile.samples.size());
  for (const Sample &s : profile.samples) {
    bool first = true;
    for (const LaidOutPart &part : lay_out_parts(s, layout)) {
      FlameStack f;
      f.value = static_cast<double>(part.ns) / 1000.0;
      for (const Frame *frame : part.frames)
        f.frames.push_back(
            {folded_safe(frame->name), frame->kind, frame->inlined});
      // The waits are whole in one part (with --runqueue, a wait's blocked
      // and runnable time are two): counted once, under the first.
      if (first)
        f.latency = s.latency;
      first = false;
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::string render_flamegraph(const std::vector<FlameStack> &stacks,
                              const FlameGraphOptions &opts) {
  StackTree tree(SIZE_MAX);
  std::vector<StackTree::FrameRef> refs;
  std::unordered_map<uint32_t, Latency> leaf_latency;
  for (const FlameStack &s : stacks) {
    if (s.value <= 0 || s.frames.empty())
      continue;
    refs.clear();
    for (const FlameFrame &f : s.frames)
      refs.push_back({f.name, f.kind, f.inlined});
    if (tree.add(refs, s.value, 0) && !s.latency.empty())
      leaf_latency[tree.last_leaf()].add(s.latency);
  }
  return render_flamegraph(tree, opts,
                           leaf_latency.empty() ? nullptr : &leaf_latency);
}

std::string
render_flamegraph(const StackTree &tree, const FlameGraphOptions &opts,
                  const std::unordered_map<uint32_t, Latency> *leaf_latency) {
  const double total = tree.node(StackTree::kRoot).value;
  const Node root{&tree.name(tree.node(StackTree::kRoot).name), Kind::Root,
                  total, StackTree::kRoot};
  int width = std::max(opts.width, 200);
  const double scale = total > 0 ? (width - 2 * kPad) / total : 0;
  // The drawn depth plus "all", as flamegraph.pl draws it.
  int height =
      kTop +
      (depth_of(tree, root, 0, scale, opts.min_width) + 1) * kFrameHeight +
      kBottom;
  Renderer r{tree,  opts,   total > 0 ? total : 1,
             scale, height, svg_head(width, height)};
  static const std::unordered_map<uint32_t, Latency> kNone;
  LatencyOfFrames lat{
      tree, leaf_latency ? *leaf_latency : kNone, scale, opts.min_width, {}};
  if (leaf_latency) {
    lat.sum(StackTree::kRoot);
    r.latency = &lat.drawn;
  }
  if (total <= 0)
    r.out += "<text x=\"" + std::to_string(width / 2) + "\" y=\"" +
             std::to_string(kTop + 20) +
             "\" text-anchor=\"middle\">no samples</text>\n";
  else
    r.frame(root, 0, 0);
  r.out += svg_tail(width, height, opts.title) + "</svg>\n";
  return r.out;
}

} // namespace offcpu
