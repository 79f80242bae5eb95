// offcpu flamegraph streams its input (issue #27, bug 9): it merges each
// folded line into a tree as it reads, so its memory follows the merged
// stacks, not the input's size. Run on the real binary: the same bytes as
// before it streamed, and a 20 MB input merged exactly within a memory
// bound far under what the whole text (and a sample per line) took.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

using test::RunResult;

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string golden(const std::string &name) {
  return std::string(OFFCPU_SOURCE_DIR) + "/tests/golden/" + name;
}

class FlamegraphStream : public test::ScratchDirTest {};

// The golden files were written by offcpu flamegraph before it streamed.
TEST_F(FlamegraphStream, WritesTheSameBytesAsBeforeItStreamed) {
  const std::string in = golden("flamegraph-input.folded");
  const std::string svg = dir_ + "/a.svg", folded = dir_ + "/a.folded";
  RunResult r =
      test::run({OFFCPU_BIN, "flamegraph", in, "-o", svg, "-o", folded}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("skipped 3 lines that are not folded stacks"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(slurp(svg) == slurp(golden("flamegraph-input.svg")));
  EXPECT_TRUE(slurp(folded) == slurp(golden("flamegraph-input-merged.folded")));
  // From stdin, with the options that change the drawing.
  r = test::run({"/bin/sh", "-c",
                 std::string("'") + OFFCPU_BIN +
                     "' flamegraph --countname samples --title 'T <x>' "
                     "--width 900 < '" +
                     in + "'"},
                60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == slurp(golden("flamegraph-input-samples.svg")));
}

// About 20 MB of folded lines drawn from a few thousand distinct stacks
// (deep walks of one random call graph), with what each merged stack must
// total, in microseconds.
struct Generated {
  std::string path;
  size_t bytes = 0;
  std::map<std::string, uint64_t> total_us;
  uint64_t sum_us = 0;
};

Generated generate(const std::string &path) {
  std::mt19937 rnd(27);
  auto below = [&](size_t n) { return static_cast<size_t>(rnd() % n); };
  const size_t kFunctions = 3000, kStacks = 4000, kLines = 80000;
  std::vector<std::vector<size_t>> callees(kFunctions);
  for (auto &c : callees)
    for (size_t i = 0, n = 1 + below(3); i < n; i++)
      c.push_back(below(kFunctions));
  std::vector<std::string> stacks;
  for (size_t s = 0; s < kStacks; s++) {
    std::string line = "worker-" + std::to_string(below(30));
    size_t f = below(40), depth = 20 + below(20);
    for (size_t d = 0; d < depth; d++) {
      line += ";svc_" + std::to_string(f);
      f = callees[f][below(callees[f].size())];
    }
    line += ";do_syscall_64_[k];schedule_[k]";
    stacks.push_back(line);
  }
  Generated g;
  g.path = path;
  std::ofstream out(path, std::ios::binary);
  for (size_t i = 0; i < kLines; i++) {
    const std::string &s = stacks[below(kStacks)];
    uint64_t us = 1 + below(100000);
    std::string line = s + " " + std::to_string(us) + "\n";
    out << line;
    g.bytes += line.size();
    g.total_us[s] += us;
    g.sum_us += us;
  }
  return g;
}

TEST_F(FlamegraphStream, TwentyMegabytesMergeExactlyInBoundedMemory) {
  Generated g = generate(dir_ + "/big.folded");
  ASSERT_GT(g.bytes, 20u << 20);
  const std::string svg = dir_ + "/big.svg", folded = dir_ + "/merged.folded";
  RunResult r = test::run(
      {OFFCPU_BIN, "flamegraph", g.path, "-o", svg, "-o", folded}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Before it streamed a 23 MB input of this kind took 434 MB (the text, a
  // sample per line and a drawing copy of each); now 74 MB: the merged
  // tree (4,000 distinct deep stacks) and the SVG being written.
  EXPECT_LT(r.max_rss_kb, 128 * 1024) << "peak RSS " << r.max_rss_kb << " KB";

  // Every distinct stack once, with the sum of its lines: kernel marks
  // kept, nothing lost.
  std::map<std::string, uint64_t> got;
  for (const auto &l : test::parse_folded(slurp(folded))) {
    std::string frames = l.text.substr(0, l.text.rfind(' '));
    EXPECT_TRUE(got.emplace(frames, l.value).second) << frames;
  }
  EXPECT_TRUE(got == g.total_us)
      << got.size() << " stacks, want " << g.total_us.size();
  // The flame graph's whole is the input's sum.
  std::string drawn = slurp(svg);
  size_t at = drawn.find("<title>all (");
  ASSERT_NE(at, std::string::npos);
  std::string shown = drawn.substr(at + 12, drawn.find(' ', at + 12) - at - 12);
  shown.erase(std::remove(shown.begin(), shown.end(), ','), shown.end());
  EXPECT_EQ(shown, std::to_string(g.sum_us));
}

} // namespace
} // namespace offcpu
