#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "output/flamegraph.h"
#include "output/folded.h"
#include "support/model_builder.h"

namespace offcpu {
namespace {

struct Box {
  std::string title;
  double width = 0;
  int depth = 0;
};

// Every frame box: its tooltip, its width and its depth.
std::vector<Box> boxes(const std::string &svg) {
  std::vector<Box> out;
  std::regex g(
      "<g class=\"f\" data-o=\"[^\"]*\" data-v=\"[^\"]*\" data-d=\"(\\d+)\">"
      "<title>([^<]*)</title><rect x=\"[^\"]*\" y=\"[^\"]*\" "
      "width=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), g);
       it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[2], std::stod((*it)[3]), std::stoi((*it)[1])});
  return out;
}

// Stacks of user frames (the first is the thread), as folded input makes.
FlameStack stack(const std::vector<std::string> &names, double value) {
  FlameStack s;
  s.value = value;
  for (size_t i = 0; i < names.size(); i++)
    s.frames.push_back(
        {names[i], i == 0 ? FrameKind::Thread : FrameKind::User});
  return s;
}

std::vector<std::string> frame_names(const FlameStack &s) {
  std::vector<std::string> out;
  for (const auto &f : s.frames)
    out.push_back(f.name);
  return out;
}

const Box *find(const std::vector<Box> &bs, const std::string &prefix,
                int depth) {
  for (const auto &b : bs)
    if (b.depth == depth && b.title.rfind(prefix, 0) == 0)
      return &b;
  return nullptr;
}

TEST(FlameGraph, ParsesFoldedFromOffcpuBccAndPerf) {
  size_t bad = 0;
  auto stacks = parse_folded_stacks("app;main;read 300\n"
                                    "app;main;write_[k] 100\r\n"
                                    "perf-style;a;b 12.5\n"
                                    "\n"
                                    "no value here\n"
                                    "negative;x -4\n",
                                    &bad);
  ASSERT_EQ(stacks.size(), 3u);
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(frame_names(stacks[0]),
            (std::vector<std::string>{"app", "main", "read"}));
  EXPECT_EQ(frame_names(stacks[1]),
            (std::vector<std::string>{"app", "main", "write"}));
  EXPECT_EQ(stacks[1].frames[2].kind, FrameKind::Kernel);
  EXPECT_EQ(stacks[0].frames[0].kind, FrameKind::Thread);
  EXPECT_DOUBLE_EQ(stacks[1].value, 100);
  EXPECT_DOUBLE_EQ(stacks[2].value, 12.5);
}

TEST(FlameGraph, WidthsAreProportionalAndEveryStackIsDrawn) {
  std::vector<FlameStack> stacks = {stack({"app", "main", "wait_a"}, 600),
                                    stack({"app", "main", "wait_b"}, 300),
                                    stack({"other", "idle"}, 100)};
  FlameGraphOptions o;
  o.width = 1020; // 1000 px for frames
  auto bs = boxes(render_flamegraph(stacks, o));
  // all, app, main, wait_a, wait_b, other, idle
  ASSERT_EQ(bs.size(), 7u);
  EXPECT_NEAR(find(bs, "all (1,000 us, 100.00%)", 0)->width, 1000, 0.01);
  EXPECT_NEAR(find(bs, "app (900 us, 90.00%)", 1)->width, 900, 0.01);
  EXPECT_NEAR(find(bs, "main", 2)->width, 900, 0.01);
  EXPECT_NEAR(find(bs, "wait_a (600 us, 60.00%)", 3)->width, 600, 0.01);
  EXPECT_NEAR(find(bs, "wait_b", 3)->width, 300, 0.01);
  EXPECT_NEAR(find(bs, "idle (100 us, 10.00%)", 2)->width, 100, 0.01);
}

// Tooltips count whole microseconds (a fraction says nothing at this
// scale), except below one.
TEST(FlameGraph, TooltipsCountWholeUnits) {
  std::string svg = render_flamegraph(
      {stack({"app", "main"}, 56250780.6), stack({"app", "tiny"}, 0.25)}, {});
  EXPECT_NE(svg.find("<title>main (56,250,781 us,"), std::string::npos);
  EXPECT_EQ(svg.find("56,250,780.60"), std::string::npos);
  EXPECT_NE(svg.find("<title>all (56,250,781 us, 100.00%)"), std::string::npos);
}

// Folded input made with -d: frames after the '-' are kernel frames.
TEST(FlameGraph, DelimitedFoldedInputMarksKernelFrames) {
  size_t bad = 0;
  auto stacks = parse_folded_stacks("t;main;read;-;ksys_read;schedule 5\n"
                                    "t;main;[Missed User Stack] 1\n",
                                    &bad);
  ASSERT_EQ(stacks.size(), 2u);
  const auto &f = stacks[0].frames;
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[2].kind, FrameKind::User);
  EXPECT_EQ(f[3].kind, FrameKind::Delimiter);
  EXPECT_EQ(f[4].kind, FrameKind::Kernel);
  EXPECT_EQ(f[5].kind, FrameKind::Kernel);
  EXPECT_EQ(stacks[1].frames[2].kind, FrameKind::Marker);
}

// A tower too narrow to draw takes no height.
TEST(FlameGraph, HeightCountsDrawnFramesOnly) {
  std::vector<std::string> tower = {"t"};
  for (int i = 0; i < 300; i++)
    tower.push_back("f" + std::to_string(i));
  std::string svg = render_flamegraph(
      {stack(tower, 1), stack({"big", "main"}, 10000000)}, {});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("height=\"(\\d+)\"")));
  EXPECT_LT(std::stoi(m[1]), 200);
}

TEST(FlameGraph, TextIsEscapedAndLongNamesTruncated) {
  std::string long_name =
      "std::map<std::string, std::vector<int>>::operator[](const std::string&) "
      "const with \"quotes\" & <angles>";
  std::vector<FlameStack> stacks = {stack({"a<b>&\"c\"", long_name}, 10),
                                    stack({"z", "y"}, 1000)};
  std::string svg = render_flamegraph(stacks, {});
  EXPECT_EQ(svg.find("a<b>"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b&gt;&amp;&quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("&lt;angles&gt;"),
            std::string::npos); // full name in the tooltip
  EXPECT_EQ(svg.find(long_name.substr(0, 40) + "</text>"),
            std::string::npos); // cut in the box
  // Well-formed enough for a browser: every <g> closed.
  size_t open = 0, close = 0;
  for (size_t p = 0; (p = svg.find("<g ", p)) != std::string::npos; p++)
    open++;
  for (size_t p = 0; (p = svg.find("</g>", p)) != std::string::npos; p++)
    close++;
  EXPECT_EQ(open, close);
}

TEST(FlameGraph, KernelFramesHaveTheirOwnColorAndNoSuffix) {
  size_t bad = 0;
  std::vector<FlameStack> stacks =
      parse_folded_stacks("t;read;read_[k] 10\n", &bad);
  std::string svg = render_flamegraph(stacks, {});
  EXPECT_EQ(svg.find("_[k]"), std::string::npos);
  std::regex fill(
      "<title>read \\(10[^<]*</title><rect[^>]*fill=\"(rgb\\([0-9,]+\\))\"");
  std::vector<std::string> fills;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), fill);
       it != std::sregex_iterator(); ++it)
    fills.push_back((*it)[1]);
  ASSERT_EQ(fills.size(), 2u); // user read and kernel read stay two boxes
  EXPECT_NE(fills[0], fills[1]);
}

TEST(FlameGraph, NarrowFramesLeftOutAndEmptyInputSaysSo) {
  std::vector<FlameStack> stacks = {stack({"big"}, 1000000),
                                    stack({"tiny"}, 1)};
  FlameGraphOptions o;
  o.min_width = 0.5;
  EXPECT_EQ(render_flamegraph(stacks, o).find("tiny"), std::string::npos);
  EXPECT_NE(render_flamegraph(std::vector<FlameStack>{}, {}).find("no samples"),
            std::string::npos);
}

TEST(FlameGraph, AbsurdlyDeepStacksAreCutNotFatal) {
  // Found by fuzzing: a line of 100,000 ';' once overflowed the renderer.
  size_t bad = 0;
  auto stacks = parse_folded_stacks(std::string(100000, ';') + " 5\n", &bad);
  ASSERT_EQ(stacks.size(), 1u);
  std::string svg = render_flamegraph(stacks, {});
  EXPECT_NE(svg.find("[truncated]"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(FlameGraph, SamplesBecomeMicrosecondStacksWithKernelMarks) {
  Sample s = test::sample("w", {"main"}, {"schedule"}, 2500);
  auto st = flame_stacks(test::profile({s}), LayoutOptions{true});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(frame_names(st[0]),
            (std::vector<std::string>{"w", "main", "-", "schedule"}));
  EXPECT_EQ(st[0].frames[3].kind, FrameKind::Kernel);
  EXPECT_EQ(st[0].frames[2].kind, FrameKind::Delimiter);
  EXPECT_DOUBLE_EQ(st[0].value, 2.5);
}

// --- Streaming: offcpu flamegraph merges lines into a tree as it reads ---

std::string golden(const std::string &name) {
  std::ifstream in(std::string(OFFCPU_SOURCE_DIR) + "/tests/golden/" + name,
                   std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Streamed {
  std::string svg, folded;
  size_t stacks = 0, bad = 0, long_lines = 0, over_budget = 0;
};

// `text` fed in pieces of `chunk` bytes, drawn with `o`.
Streamed stream(std::string_view text, size_t chunk,
                const FlameGraphOptions &o = {},
                size_t max_nodes = StackTree::kDefaultMaxNodes) {
  StackTree tree(max_nodes);
  FoldedReader r(tree);
  for (size_t i = 0; i < text.size(); i += chunk)
    r.feed(text.substr(i, chunk));
  r.finish();
  return {render_flamegraph(tree, o),
          render_folded(tree),
          r.stacks,
          r.bad_lines,
          r.long_lines,
          r.over_budget};
}

FlameGraphOptions folded_input_options() {
  FlameGraphOptions o;
  o.title = "Flame Graph"; // offcpu flamegraph's own title
  return o;
}

// tests/golden/flamegraph-input.* were written by offcpu flamegraph before
// it streamed (the whole text read, every line a sample): kernel marks,
// -d, markers, duplicates, zero and fractional values, bad lines, CRLF,
// invalid UTF-8, XML characters, and stacks past the drawn depth.
TEST(FlameGraphStream, SameBytesAsTheWholeTextGave) {
  const std::string in = golden("flamegraph-input.folded");
  ASSERT_FALSE(in.empty());
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, in.size()}) {
    Streamed s = stream(in, chunk, folded_input_options());
    EXPECT_TRUE(s.svg == golden("flamegraph-input.svg")) << chunk;
    EXPECT_TRUE(s.folded == golden("flamegraph-input-merged.folded")) << chunk;
    EXPECT_EQ(s.bad, 3u);
  }
  FlameGraphOptions o;
  o.title = "T <x>";
  o.count_name = "samples";
  o.width = 900;
  EXPECT_TRUE(stream(in, 4096, o).svg ==
              golden("flamegraph-input-samples.svg"));
}

TEST(FlameGraphStream, IdenticalLinesMergeIntoOneStack) {
  Streamed s = stream("a;f;g 10\nb;f 1\na;f;g 5\na;f;g_[k] 2\n", 3);
  EXPECT_EQ(s.stacks, 4u);
  EXPECT_EQ(s.folded, "a;f;g 15\na;f;g_[k] 2\nb;f 1\n");
  auto bs = boxes(s.svg);
  const Box *g = find(bs, "g (15 us", 3), *gk = find(bs, "g (2 us", 3);
  ASSERT_TRUE(g && gk) << s.svg; // the kernel frame is its own box
  ASSERT_TRUE(find(bs, "a (17 us", 1));
}

TEST(FlameGraphStream, LineOverTheLimitIsSkippedAndCounted) {
  std::string in =
      "a;b 1\n" + std::string(FoldedReader::kMaxLine, 'x') + ";y 5\nc;d 2\n";
  for (size_t chunk : {size_t{1000}, size_t{65536}, in.size()}) {
    Streamed s = stream(in, chunk);
    EXPECT_EQ(s.long_lines, 1u) << chunk;
    EXPECT_EQ(s.stacks, 2u) << chunk;
    EXPECT_EQ(s.folded, "c;d 2\na;b 1\n") << chunk;
  }
  // One just under the limit is kept.
  std::string fits = std::string(FoldedReader::kMaxLine - 5, 'x') + ";y 5";
  EXPECT_EQ(stream(fits, 4096).stacks, 1u);
}

TEST(FlameGraphStream, StacksPastTheNodeBudgetAreLeftOutWhole) {
  // Root "all" + 4 nodes fit: the second stack needs 2 more and is left
  // out whole (no half-stack); the third shares the first's frames.
  Streamed s = stream("a;b;c 1\nx;y 2\na;b 4\n", 1024, {}, 5);
  EXPECT_EQ(s.stacks, 2u);
  EXPECT_EQ(s.over_budget, 1u);
  EXPECT_EQ(s.folded, "a;b 4\na;b;c 1\n");
}

TEST(FlameGraphStream, TreeMemoryFollowsDistinctFramesNotLines) {
  // 100,000 lines over 10 distinct stacks: 13 nodes ("all", the thread,
  // main and the 10 leaves).
  std::string in;
  for (int i = 0; i < 100000; i++)
    in += "t;main;f" + std::to_string(i % 10) + " 1\n";
  StackTree tree;
  FoldedReader r(tree);
  r.feed(in);
  r.finish();
  EXPECT_EQ(r.stacks, 100000u);
  EXPECT_EQ(tree.size(), 13u);
  EXPECT_DOUBLE_EQ(tree.node(StackTree::kRoot).value, 100000.0);
}

} // namespace
} // namespace offcpu
