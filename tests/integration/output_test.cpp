// Outputs a user opens, end to end: SVG (rendered by headless Chromium),
// pprof (read back by `go tool pprof`), files that appear only when
// complete, and every way a run can be cut short.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/chromium.h"
#include "support/folded_parse.h"
#include "support/png.h"
#include "support/process.h"
#include "support/root_fixture.h"
#include "symbolize/elf_file.h"

namespace offcpu {
namespace {

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string &path) {
  return access(path.c_str(), F_OK) == 0;
}

std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

class Blocker {
public:
  Blocker() : proc_(std::vector<std::string>{WORKLOAD_BLOCKER}) {
    auto line = proc_.read_line(10);
    if (!line || line->rfind("ready ", 0) != 0)
      throw std::runtime_error("workload did not start");
    pid_ = line->substr(6);
    test::sleep_seconds(0.3);
  }
  const std::string &pid() const { return pid_; }

private:
  test::Subprocess proc_;
  std::string pid_;
};

class Output : public test::RootTest {
protected:
  void TearDown() override {
    if (!dir_.empty())
      umount2((dir_ + "/small").c_str(), MNT_DETACH);
    RootTest::TearDown();
  }
};

// Cumulative time per frame name in folded lines, as pprof's "cum" counts
// it: each line once per distinct frame in it.
std::map<std::string, double>
folded_cum(const std::vector<test::FoldedLine> &lines) {
  std::map<std::string, double> cum;
  for (const auto &l : lines) {
    std::set<std::string> seen(l.frames.begin(), l.frames.end());
    for (const auto &f : seen)
      cum[f] += static_cast<double>(l.value);
  }
  return cum;
}

TEST_F(Output, SvgPprofAndFoldedFromOneRunAgree) {
  Blocker w;
  std::string svg = dir_ + "/p.svg", pb = dir_ + "/p.pb.gz",
              folded = dir_ + "/p.folded";
  auto r = test::run(
      {OFFCPU_BIN, "-p", w.pid(), "-o", svg, "-o", pb, "-o", folded, "2"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << "results went to the files, not stdout";
  ASSERT_TRUE(exists(svg) && exists(pb) && exists(folded))
      << "in " << dir_ << ": " << ::testing::PrintToString(list_dir(dir_))
      << "\n"
      << r.err;
  EXPECT_EQ(list_dir(dir_).size(), 3u) << "no temporary files left behind";
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);

  if (access("/usr/bin/go", X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed: pprof not "
                    "read back";
  auto top =
      test::run({"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=100000",
                 "-nodefraction=0", "-sample_index=off_cpu", "-unit=us", pb},
                120);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("Type: off_cpu"), std::string::npos) << top.out;
  // "flat flat% sum% cum cum% name", values in us.
  std::map<std::string, double> pprof_cum;
  std::regex row("^\\s*([0-9.]+)(?:us)?\\s+[0-9.]+%\\s+[0-9.]+%\\s+([0-9.]+)(?:"
                 "us)?\\s+[0-9.]+%\\s+(.+)$");
  std::istringstream lines(top.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row))
      pprof_cum[m[3]] = std::stod(m[2]);
  }
  auto cum = folded_cum(test::parse_folded(slurp(folded)));
  for (const char *fn :
       {"sleeper", "block_in_nanosleep", "pipe_reader_main", "stuck_main",
        "wait_for_contended_mutex", "do_nanosleep", "start_thread"}) {
    ASSERT_TRUE(pprof_cum.count(fn)) << fn << " missing from pprof:\n"
                                     << top.out;
    EXPECT_NEAR(pprof_cum[fn], cum[fn], cum[fn] * 0.001 + 50) << fn;
  }
  std::cerr << "pprof cum block_in_nanosleep "
            << pprof_cum["block_in_nanosleep"] << " us, folded "
            << cum["block_in_nanosleep"] << " us\n";
}

struct RawPprof {
  struct Range {
    uint64_t start, limit;
    std::string file, build_id;
    bool functions;
  };
  std::map<int, Range> mappings;
  struct Loc {
    uint64_t address;
    int mapping;
    std::string name;
  };
  std::vector<Loc> locations;
};

// `go tool pprof -raw`'s Locations and Mappings sections.
RawPprof read_raw(const std::string &text) {
  RawPprof r;
  std::regex loc("^\\s*\\d+: 0x([0-9a-f]+) M=(\\d+) ?(\\S*).*$");
  std::regex map("^(\\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x[0-9a-f]+ (\\S+) "
                 "?(\\S*) ?(\\[FN\\])?.*$");
  std::istringstream in(text);
  bool in_maps = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line == "Mappings")
      in_maps = true;
    else if (!in_maps && std::regex_match(line, m, loc))
      r.locations.push_back(
          {std::stoull(m[1], nullptr, 16), std::stoi(m[2]), m[3]});
    else if (in_maps && std::regex_match(line, m, map))
      r.mappings[std::stoi(m[1])] = {std::stoull(m[2], nullptr, 16),
                                     std::stoull(m[3], nullptr, 16), m[4],
                                     m[5] == "[FN]" ? "" : std::string(m[5]),
                                     m[5] == "[FN]" || m[6].matched};
  }
  return r;
}

// pprof that servers can symbolize: real addresses inside real mapping
// ranges with file names and build ids; pprof's own tools find the source
// lines from them; --no-symbolize leaves the naming to the reader.
TEST_F(Output, PprofAddressesMappingsAndBuildIds) {
  if (access("/usr/bin/go", X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed";
  Blocker w;
  std::string pb = dir_ + "/p.pb.gz", raw = dir_ + "/raw.pb.gz";
  auto r = test::run({OFFCPU_BIN, "-p", w.pid(), "-o", pb, "1"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto unnamed = test::run({OFFCPU_BIN, "-p", w.pid(), "--no-symbolize", "-f",
                            "-o", raw, "-o", "-", "1"},
                           60);
  ASSERT_EQ(unnamed.exit_code, 0) << unnamed.err;
  auto blocker_elf = ElfFile::open(WORKLOAD_BLOCKER);
  ASSERT_TRUE(blocker_elf);
  const std::string build_id = blocker_elf->build_id();
  char real[PATH_MAX];
  ASSERT_TRUE(realpath(WORKLOAD_BLOCKER, real));

  auto dump = test::run({"/usr/bin/go", "tool", "pprof", "-raw", pb}, 120);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  RawPprof p = read_raw(dump.out);
  int blocker_mapping = 0;
  for (const auto &[id, m] : p.mappings)
    if (m.file == real) {
      blocker_mapping = id;
      EXPECT_EQ(m.build_id, build_id);
      EXPECT_TRUE(m.functions);
      EXPECT_LT(m.start, m.limit);
    }
  ASSERT_NE(blocker_mapping, 0) << dump.out;
  bool named = false;
  for (const auto &l : p.locations) {
    if (!l.mapping)
      continue;
    const auto &m = p.mappings.at(l.mapping);
    EXPECT_TRUE(l.address >= m.start && l.address < m.limit)
        << std::hex << l.address << " " << l.name;
    named |= l.mapping == blocker_mapping && l.name == "block_in_nanosleep";
  }
  EXPECT_TRUE(named) << dump.out;
  // pprof re-symbolizes from the file and finds the source lines (the
  // compile unit's path is relative: say where the sources are, whatever
  // directory ctest runs this from).
  auto list = test::run({"/usr/bin/go", "tool", "pprof", "-symbolize=force",
                         "-source_path", OFFCPU_SOURCE_DIR "/tests", "-list",
                         "^block_in_pipe_read$", pb},
                        120);
  EXPECT_NE(list.out.find("blocker.c"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("void block_in_pipe_read(void) {"), std::string::npos)
      << list.out;

  // --no-symbolize: addresses and build ids only; folded says file+offset.
  EXPECT_NE(unnamed.out.find(";offcpu_blocker+0x"), std::string::npos)
      << unnamed.out;
  auto none = test::run(
      {"/usr/bin/go", "tool", "pprof", "-raw", "-symbolize=none", raw}, 120);
  RawPprof n = read_raw(none.out);
  bool any = false;
  for (const auto &l : n.locations)
    if (l.mapping && n.mappings.at(l.mapping).file == real) {
      any = true;
      EXPECT_TRUE(l.name.empty()) << l.name;
      EXPECT_FALSE(n.mappings.at(l.mapping).functions);
      EXPECT_EQ(n.mappings.at(l.mapping).build_id, build_id);
    }
  EXPECT_TRUE(any) << none.out;
  // What a server does with them: pprof names them from the file.
  auto top = test::run(
      {"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=1000", raw}, 120);
  EXPECT_NE(top.out.find("block_in_nanosleep"), std::string::npos) << top.out;
}

TEST_F(Output, SvgRendersInChromiumAndItsScriptsWork) {
  if (!test::chromium_installed())
    GTEST_SKIP() << "chromium (Debian package chromium) is not installed";
  Blocker w;
  std::string svg = dir_ + "/graph.svg";
  auto r = test::run({OFFCPU_BIN, "-p", w.pid(), "--format", "svg", "--title",
                      "offcpu test", "-o", svg, "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // A screenshot that shows a graph: a good share of the off-CPU blues.
  std::string png = dir_ + "/graph.png";
  auto shot =
      test::chromium_screenshot("file://" + svg, png, dir_ + "/chrome1");
  const auto &img = shot.image;
  ASSERT_TRUE(img) << "no screenshot: " << shot.log;
  size_t blue = test::user_frame_pixels(*img), pixels = img->rgb.size() / 3;
  EXPECT_GT(blue, pixels / 20) << "the screenshot shows almost no frames";
  EXPECT_EQ(shot.log.find("Uncaught"), std::string::npos) << shot.log;
  std::cerr << "screenshot " << png << ": " << 100 * blue / pixels
            << "% frame pixels\n";
  test::run({"/bin/cp", png, "/tmp/offcpu-flamegraph-screenshot.png"}, 10);

  // Search by URL (?s=) and zoom (?x=): the scripts run and change the page.
  auto dom = test::chromium_dom("file://" + svg + "?s=block_in_nanosleep&x=1",
                                dir_ + "/chrome2");
  EXPECT_EQ(dom.err.find("Uncaught"), std::string::npos) << dom.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom.out, m, std::regex("Matched: ([0-9.]+)%")))
      << dom.out.substr(0, 2000);
  EXPECT_GT(std::stod(m[1]), 1.0);
  EXPECT_TRUE(std::regex_search(dom.out, std::regex("class=\"f[^\"]* match")));
  EXPECT_NE(dom.out.find("Reset Zoom"), std::string::npos);
  EXPECT_NE(dom.out.find("f hide"), std::string::npos) << "zoom hid nothing";
}

// A tall graph (one deep narrow tower beside many shallow wide stacks, as
// a whole-system run gives) opens at its root: the first screen shows the
// wide frames and the title, not the tower's tips over empty space.
TEST_F(Output, TallSvgOpensAtItsRootInChromium) {
  if (!test::chromium_installed())
    GTEST_SKIP() << "chromium (Debian package chromium) is not installed";
  std::string in = dir_ + "/tall.folded";
  {
    std::ofstream f(in);
    f << "tower";
    for (int i = 0; i < 200; i++)
      f << ";deep_" << i;
    f << " 20000\n";
    for (int i = 0; i < 12; i++)
      f << "worker" << i << ";start_thread;loop;wait;-;futex_wait;schedule "
        << 100000 << "\n";
  }
  std::string svg = dir_ + "/tall.svg", png = dir_ + "/tall.png";
  auto r = test::run({OFFCPU_BIN, "flamegraph", in, "-o", svg}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto shot =
      test::chromium_screenshot("file://" + svg, png, dir_ + "/chrome3");
  const auto &img = shot.image;
  ASSERT_TRUE(img) << "no screenshot: " << shot.log;
  test::run({"/bin/cp", png, "/tmp/offcpu-tall-flamegraph.png"}, 10);
  auto share = [&](uint32_t y0, uint32_t y1, auto pick) {
    size_t hits = 0, all = 0;
    for (uint32_t y = y0; y < y1 && y < img->height; y++)
      for (uint32_t x = 0; x < img->width; x++, all++) {
        const uint8_t *p = &img->rgb[3 * (y * img->width + x)];
        hits += pick(p[0], p[1], p[2]);
      }
    return all ? static_cast<double>(hits) / static_cast<double>(all) : 0;
  };
  auto frame = [](int red, int g, int b) {
    return test::user_frame_blue(red, g, b) ||
           (g > red + 60 && b > red + 60); // kernel (teal)
  };
  auto ink = [](int red, int g, int b) { return red + g + b < 200; };
  // The bottom 200 px: the workers' wide stacks (7 rows of frames).
  double bottom = share(img->height - 200, img->height, frame);
  EXPECT_GT(bottom, 0.25) << "the root is not on the first screen";
  // The title stays on top.
  EXPECT_GT(share(0, 34, ink), 0.002) << "no title on the first screen";
  std::cerr << "tall graph screenshot /tmp/offcpu-tall-flamegraph.png: "
            << static_cast<int>(100 * bottom)
            << "% frame pixels in the bottom 200 px\n";
}

TEST_F(Output, FlamegraphCommandReadsFoldedFromOtherTools) {
  std::string in = dir_ + "/in.folded";
  std::ofstream(in) << "bcc_thread;main;do_work;read;ksys_read;schedule 1500\n"
                       "perf-thread;main;compute_[j] 250.5\n"
                       "this line is junk\n";
  auto r = test::run({OFFCPU_BIN, "flamegraph", in, "--title", "From BCC"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("From BCC"), std::string::npos);
  EXPECT_NE(r.out.find("<title>do_work (1,500 us"), std::string::npos)
      << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("compute"), std::string::npos);
  EXPECT_NE(r.err.find("skipped 1 lines"), std::string::npos) << r.err;
  auto bad =
      test::run({OFFCPU_BIN, "flamegraph", dir_ + "/missing.folded"}, 30);
  EXPECT_EQ(bad.exit_code, 2);
  std::ofstream(dir_ + "/junk") << "nothing folded here\n";
  EXPECT_EQ(test::run({OFFCPU_BIN, "flamegraph", dir_ + "/junk"}, 30).exit_code,
            2);
}

// --per-pid / --per-thread: the first frame names the process or thread as
// stackcollapse-perf.pl --pid/--tid do, in every format.
TEST_F(Output, PerThreadAndPerPidFirstFrames) {
  Blocker w;
  std::string svg = dir_ + "/t.svg";
  auto r = test::run({OFFCPU_BIN, "-p", w.pid(), "--per-thread", "-f", "-o",
                      "-", "-o", svg, "1"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  std::regex thread_frame("(.+)-" + w.pid() + "/(\\d+)");
  std::set<std::string> tids;
  for (const auto &l : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l.frames[0], m, thread_frame)) << l.text;
    tids.insert(m[2]);
    EXPECT_TRUE(exists("/proc/" + w.pid() + "/task/" + std::string(m[2])))
        << l.text;
  }
  EXPECT_GE(tids.size(), 5u) << r.out;
  EXPECT_NE(slurp(svg).find("sleeper-" + w.pid() + "/"), std::string::npos);

  auto p = test::run({OFFCPU_BIN, "-p", w.pid(), "--per-pid", "-f", "1"}, 60);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  for (const auto &l : test::parse_folded(p.out)) {
    const std::string &f = l.frames[0];
    EXPECT_EQ(f.substr(f.rfind('-') + 1), w.pid()) << l.text;
  }
}

bool gzip_file(const std::string &path) {
  std::string b = slurp(path);
  return b.size() > 2 && static_cast<unsigned char>(b[0]) == 0x1f &&
         static_cast<unsigned char>(b[1]) == 0x8b;
}

// offcpu flamegraph takes each -o's format from its name, as the tracing
// commands do: folded input merged back into folded, drawn as SVG, or
// written as pprof; text (which needs thread ids) is refused.
TEST_F(Output, FlamegraphCommandWritesEachFileInItsFormat) {
  std::string in = dir_ + "/in.folded";
  std::ofstream(in) << "app;main;read;-;ksys_read;schedule 1500\n"
                       "app;main;read;-;ksys_read;schedule 500\n"
                       "perf;main;compute_[j];sys_read_[k] 250\n";
  std::string pb = dir_ + "/x.pb.gz", folded = dir_ + "/x.folded",
              svg = dir_ + "/x.svg";
  auto r = test::run(
      {OFFCPU_BIN, "flamegraph", in, "-o", pb, "-o", folded, "-o", svg}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(slurp(folded), "app;main;read;-;ksys_read_[k];schedule_[k] 2000\n"
                           "perf;main;compute;sys_read_[k] 250\n");
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);
  EXPECT_TRUE(gzip_file(pb));
  if (access("/usr/bin/go", X_OK) == 0) {
    auto top = test::run({"/usr/bin/go", "tool", "pprof", "-top", "-unit=us",
                          "-nodecount=100", pb},
                         120);
    EXPECT_EQ(top.exit_code, 0) << top.err;
    EXPECT_NE(top.out.find("Type: off_cpu"), std::string::npos) << top.out;
    EXPECT_TRUE(std::regex_search(top.out, std::regex("2000us.*ksys_read")))
        << top.out;
  }
  // Refusals are usage errors, before anything is written.
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"-o", dir_ + "/x.txt"},
        std::vector<std::string>{"--format", "text"}}) {
    std::vector<std::string> args = {OFFCPU_BIN, "flamegraph", in};
    args.insert(args.end(), bad.begin(), bad.end());
    auto refused = test::run(args, 30);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_TRUE(refused.out.empty());
  }
  EXPECT_FALSE(exists(dir_ + "/x.txt"));
}

TEST_F(Output, UnwritableOutputFailsBeforeTracing) {
  auto r = test::run({OFFCPU_BIN, "-o", dir_ + "/no/such/dir/x.svg", "1"}, 30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot write " + dir_ + "/no/such/dir/x.svg"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Tracing"), std::string::npos)
      << "failed only after tracing";
}

TEST_F(Output, DiskFullIsReportedAndLeavesNoFile) {
  std::string small = dir_ + "/small";
  mkdir(small.c_str(), 0755);
  if (mount("tmpfs", small.c_str(), "tmpfs", 0, "size=8k") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs";
  auto r = test::run(
      {OFFCPU_BIN, "--format", "svg", "-o", small + "/x.svg", "1"}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_TRUE(list_dir(small).empty()) << "a partial file was left";
}

TEST_F(Output, InterruptedRunStillWritesACompleteFile) {
  Blocker w;
  std::string out = dir_ + "/run.svg";
  test::Subprocess p({OFFCPU_BIN, "-p", w.pid(), "-o", out});
  test::sleep_seconds(1.0);
  EXPECT_FALSE(exists(out)) << "the file must not exist before it is complete";
  p.signal(SIGTERM);
  auto r = p.wait(30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string svg = slurp(out);
  EXPECT_NE(svg.find("block_in_nanosleep"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(list_dir(dir_).size(), 1u);
}

TEST_F(Output, SecondCtrlCExitsAtOnceWithoutAFile) {
  std::string out = dir_ + "/never.svg";
  // Whole system. Everything after the first Ctrl-C takes a few ms, so the
  // second one may come too late: a few attempts, one of which must land.
  for (int attempt = 0; attempt < 8; attempt++) {
    test::Subprocess p({OFFCPU_BIN, "-o", out});
    test::sleep_seconds(1.0);
    p.signal(SIGINT);
    // Distinct signals: a SIGINT still pending when the next comes merges.
    test::sleep_seconds(0.0005 * (attempt % 4 + 1));
    p.signal(SIGINT);
    auto r = p.wait(30);
    if (r.exit_code == 0) {
      std::remove(out.c_str());
      continue;
    }
    EXPECT_EQ(r.exit_code, 130) << r.err;
    EXPECT_TRUE(list_dir(dir_).empty()) << "an unfinished file was left";
    return;
  }
  GTEST_SKIP() << "every run finished between the two signals";
}

TEST_F(Output, CtrlCBeforeTracingStartsWritesNothing) {
  std::string out = dir_ + "/early.svg";
  test::Subprocess p({OFFCPU_BIN, "-o", out, "5"});
  test::sleep_seconds(0.015); // it loads its programs for ~30 ms: land there
  p.signal(SIGINT);
  double t0 = test::now_seconds();
  auto r = p.wait(30);
  EXPECT_LT(test::now_seconds() - t0, 10.0) << "hung";
  // Either the default action (the handler was not yet installed) or ours.
  EXPECT_TRUE(r.term_signal == SIGINT || r.exit_code == 130)
      << r.exit_code << " " << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_TRUE(list_dir(dir_).empty()) << "a file was left";
}

TEST_F(Output, ProgressLineOnlyOnATerminal) {
  if (access("/usr/bin/script", X_OK) != 0)
    GTEST_SKIP() << "script (util-linux) is not installed";
  Blocker w;
  std::string cmd =
      std::string(OFFCPU_BIN) + " -p " + w.pid() + " -f 3 > /dev/null";
  // script gives the command a terminal; its stderr comes back in our stdout.
  auto tty = test::run({"/usr/bin/script", "-qec", cmd, "/dev/null"}, 60);
  EXPECT_TRUE(std::regex_search(
      tty.out, std::regex("\roffcpu: [12]/3 s, \\d+ waits, \\d+ stacks")))
      << tty.out;
  auto quiet =
      test::run({"/usr/bin/script", "-qec", cmd + " -q", "/dev/null"}, 60);
  EXPECT_EQ(quiet.out.find("waits,"), std::string::npos) << quiet.out;
  auto piped = test::run({OFFCPU_BIN, "-p", w.pid(), "-f", "3"}, 60);
  EXPECT_EQ(piped.err.find("waits,"), std::string::npos)
      << "progress on a non-terminal";
}

} // namespace
} // namespace offcpu
