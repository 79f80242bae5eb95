#include "output/flamegraph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "output/folded.h"
#include "util/parse.h"
#include "util/utf8.h"

namespace offcpu {
namespace {

constexpr int kFrameHeight = 16;
constexpr int kFontSize = 12;
constexpr double kFontWidth = 0.59; // average glyph width / font size
constexpr int kPad = 10;
constexpr int kTop = 56; // title, buttons and details
constexpr int kBottom = 24;
// Deeper stacks are cut (the tree is walked recursively): far beyond any
// real stack, and a file of ';' must not exhaust our own stack.
constexpr size_t kMaxFrames = 1024;

enum class Kind { User, Kernel, Comm, Marker };

struct Node {
  std::string name;
  Kind kind = Kind::User;
  double value = 0;
  std::map<std::string, std::unique_ptr<Node>> children; // drawn in name order
};

// flamegraph.pl annotations: _[k] kernel, _[j] JIT, _[i] inlined, _[w] waker.
Kind strip_annotation(std::string &name) {
  if (name.size() > 4 && name[name.size() - 4] == '_' &&
      name[name.size() - 3] == '[' && name.back() == ']') {
    char a = name[name.size() - 2];
    name.resize(name.size() - 4);
    return a == 'k' ? Kind::Kernel : Kind::User;
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
  double v = static_cast<double>(name_hash(n.name) % 1000) / 1000.0;
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

std::string count_text(double v) {
  char buf[32];
  if (v == std::floor(v))
    snprintf(buf, sizeof(buf), "%.0f", v);
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

struct Renderer {
  const FlameGraphOptions &o;
  double total;
  double scale; // pixels per unit of value
  int height;
  std::string out;

  void frame(const Node &n, double offset, int depth) {
    double w = n.value * scale;
    if (w < o.min_width)
      return;
    double x = kPad + offset * scale;
    double y = height - kBottom - (depth + 1) * kFrameHeight;
    std::string title = n.name + " (" + count_text(n.value) + " " +
                        o.count_name + ", " + fmt(100.0 * n.value / total) +
                        "%)";
    out += "<g class=\"f\" data-o=\"" + fmt(offset) + "\" data-v=\"" +
           fmt(n.value) + "\" data-d=\"" + std::to_string(depth) +
           "\"><title>" + xml_escape(title) + "</title><rect x=\"" + fmt(x) +
           "\" y=\"" + fmt(y) + "\" width=\"" + fmt(w) + "\" height=\"" +
           std::to_string(kFrameHeight - 1) + "\" rx=\"2\" fill=\"" + color(n) +
           "\"/><text x=\"" + fmt(x + 3) + "\" y=\"" +
           fmt(y + kFrameHeight - 4.5) + "\">" + xml_escape(fit(n.name, w)) +
           "</text></g>\n";
    double child_offset = offset;
    for (const auto &[name, child] : n.children) {
      frame(*child, child_offset, depth + 1);
      child_offset += child->value;
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

int depth_of(const Node &n) {
  int d = 0;
  for (const auto &[name, c] : n.children)
    d = std::max(d, 1 + depth_of(*c));
  return d;
}

// The page's behaviour: zoom, search, tooltips' details line. Kept short and
// dependency-free; it runs in any browser that opens SVG.
const char kScript[] = R"JS(
(function () {
  var svg = document.documentElement, frames = [], W = 0, pad = 10;
  var details, matched, unzoom, searchBtn, searching = false;
  function name(g) { var t = g.querySelector('title').textContent;
    return t.substring(0, t.lastIndexOf(' (')); }
  function init() {
    details = document.getElementById('details');
    matched = document.getElementById('matched');
    unzoom = document.getElementById('unzoom');
    searchBtn = document.getElementById('search');
    W = parseFloat(svg.getAttribute('width')) - 2 * pad;
    var gs = document.querySelectorAll('g.f');
    for (var i = 0; i < gs.length; i++) {
      var g = gs[i], r = g.querySelector('rect');
      frames.push({ g: g, r: r, t: g.querySelector('text'), o: +g.dataset.o,
                    v: +g.dataset.v, d: +g.dataset.d, fill: r.getAttribute('fill'),
                    name: name(g) });
      g.addEventListener('click', zoomTo.bind(null, frames[frames.length - 1]));
      g.addEventListener('mouseover', show.bind(null, g));
      g.addEventListener('mouseout', function () { details.textContent = ' '; });
    }
    unzoom.addEventListener('click', reset);
    searchBtn.addEventListener('click', function () {
      if (searching) { search(''); return; }
      var term = prompt('Search for (regular expression):', '');
      if (term) search(term);
    });
    window.addEventListener('keydown', function (e) {
      if ((e.ctrlKey || e.metaKey) && e.key === 'f') {
        e.preventDefault();
        var term = prompt('Search for (regular expression):', '');
        if (term) search(term);
      }
      if (e.key === 'Escape') { reset(); search(''); }
    });
    var params = new URLSearchParams(document.location.search);
    if (params.get('x') !== null) { var f = frames[+params.get('x')]; if (f) zoomTo(f); }
    if (params.get('s')) search(params.get('s'));
  }
  function show(g) { details.textContent = g.querySelector('title').textContent; }
  function fitText(f, w) {
    var chars = Math.floor((w - 6) / (12 * 0.59));
    f.t.textContent = chars < 3 ? '' : (f.name.length <= chars ? f.name : f.name.substring(0, chars - 2) + '..');
  }
  function place(f, x, w) {
    f.r.setAttribute('x', x); f.r.setAttribute('width', w);
    f.t.setAttribute('x', x + 3); fitText(f, w);
  }
  function zoomTo(z) {
    unzoom.classList.remove('hide');
    var k = W / z.v;
    frames.forEach(function (f) {
      var inside = f.o >= z.o - 1e-9 && f.o + f.v <= z.o + z.v + 1e-9 && f.d >= z.d;
      var below = f.d < z.d && f.o <= z.o + 1e-9 && f.o + f.v >= z.o + z.v - 1e-9;
      f.g.classList.toggle('hide', !inside && !below);
      f.g.classList.toggle('parent', below);
      if (inside) place(f, pad + (f.o - z.o) * k, f.v * k);
      else if (below) place(f, pad, W);
    });
  }
  function reset() {
    unzoom.classList.add('hide');
    var total = 0; frames.forEach(function (f) { if (f.d === 0) total += f.v; });
    var k = W / total;
    frames.forEach(function (f) {
      f.g.classList.remove('hide'); f.g.classList.remove('parent');
      place(f, pad + f.o * k, f.v * k);
    });
  }
  function search(term) {
    var re = null;
    try { re = term ? new RegExp(term) : null; } catch (e) { re = null; }
    var total = 0, spans = [];
    frames.forEach(function (f) {
      if (f.d === 0) total += f.v;
      var hit = re !== null && re.test(f.name);
      f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);
      f.g.classList.toggle('match', hit);
      if (hit) spans.push([f.o, f.o + f.v]);
    });
    // Matched share without counting nested matches twice.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -Infinity;
    spans.forEach(function (s) {
      if (s[0] >= end) { covered += s[1] - s[0]; end = s[1]; }
      else if (s[1] > end) { covered += s[1] - end; end = s[1]; }
    });
    matched.textContent = re ? 'Matched: ' + (100 * covered / total).toFixed(1) + '%' : ' ';
    searching = re !== null;
    searchBtn.textContent = searching ? 'Reset Search' : 'Search';
  }
  window.addEventListener('load', init);
})();
)JS";

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

std::vector<FoldedStack> parse_folded_stacks(std::string_view text,
                                             size_t *bad_lines) {
  std::vector<FoldedStack> stacks;
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
    FoldedStack s;
    s.value = value;
    std::string_view frames = line.substr(0, space);
    while (true) {
      size_t semi = frames.find(';');
      s.frames.push_back(valid_utf8(frames.substr(0, semi)));
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

std::vector<FoldedStack> stacks_from_samples(const std::vector<Sample> &samples,
                                             bool delimited) {
  std::vector<FoldedStack> out;
  for (const Sample &s : samples) {
    FoldedStack f;
    f.value = static_cast<double>(s.total_ns) / 1000.0;
    f.frames.push_back(folded_safe(s.comm));
    if (s.user_missed)
      f.frames.push_back("[Missed User Stack]");
    for (const auto &u : s.user)
      f.frames.push_back(folded_safe(u));
    if (delimited && (s.user_missed || !s.user.empty()) &&
        (s.kernel_missed || !s.kernel.empty()))
      f.frames.push_back("-");
    if (s.kernel_missed)
      f.frames.push_back("[Missed Kernel Stack]_[k]");
    for (const auto &k : s.kernel)
      f.frames.push_back(folded_safe(k) + "_[k]");
    out.push_back(std::move(f));
  }
  return out;
}

std::string render_flamegraph(const std::vector<FoldedStack> &stacks,
                              const FlameGraphOptions &opts) {
  Node root;
  root.name = "all";
  for (const FoldedStack &s : stacks) {
    if (s.value <= 0 || s.frames.empty())
      continue;
    root.value += s.value;
    Node *n = &root;
    size_t depth = std::min(s.frames.size(), kMaxFrames);
    for (size_t i = 0; i < depth; i++) {
      std::string name = i + 1 == kMaxFrames ? "[truncated]" : s.frames[i];
      Kind kind = strip_annotation(name);
      if (i == 0)
        kind = Kind::Comm;
      else if (name == "-" || name.rfind("[Missed", 0) == 0)
        kind = Kind::Marker;
      // A kernel frame and a user frame of the same name stay apart.
      std::string key = name + (kind == Kind::Kernel ? "\x01k" : "");
      auto &child = n->children[key];
      if (!child) {
        child = std::make_unique<Node>();
        child->name = name;
        child->kind = kind;
      }
      child->value += s.value;
      n = child.get();
    }
  }

  int width = std::max(opts.width, 200);
  int depth = depth_of(root);
  int height = kTop + (depth + 1) * kFrameHeight + kBottom;
  Renderer r{opts,
             root.value > 0 ? root.value : 1,
             root.value > 0 ? (width - 2 * kPad) / root.value : 0,
             height,
             {}};
  std::string &o = r.out;
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
  o += kScript;
  o += "]]></script>\n";
  o += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" "
       "fill=\"#f4f6fa\"/>\n";
  o += "<text id=\"title\" x=\"" + std::to_string(width / 2) +
       "\" y=\"24\" text-anchor=\"middle\">" + xml_escape(opts.title) +
       "</text>\n";
  o += "<text id=\"unzoom\" class=\"button hide\" x=\"" + std::to_string(kPad) +
       "\" y=\"24\">Reset Zoom</text>\n";
  o += "<text id=\"search\" class=\"button\" x=\"" +
       std::to_string(width - kPad) +
       "\" y=\"24\" text-anchor=\"end\">Search</text>\n";
  o += "<text id=\"details\" x=\"" + std::to_string(kPad) + "\" y=\"" +
       std::to_string(height - 8) + "\"> </text>\n";
  o += "<text id=\"matched\" x=\"" + std::to_string(width - kPad) + "\" y=\"" +
       std::to_string(height - 8) + "\" text-anchor=\"end\"> </text>\n";
  if (root.value <= 0) {
    o += "<text x=\"" + std::to_string(width / 2) + "\" y=\"" +
         std::to_string(kTop + 20) +
         "\" text-anchor=\"middle\">no samples</text>\n";
  } else {
    double offset = 0;
    for (const auto &[name, child] : root.children) {
      r.frame(*child, offset, 0);
      offset += child->value;
    }
  }
  o += "</svg>\n";
  return o;
}

} // namespace offcpu
