// User stacks of code built without frame pointers, compared with gdb's
// backtraces of the same blocked threads (the oracle): real Debian programs
// (bash, python3, sleep) and test programs built with -O2
// -fomit-frame-pointer, stripped, with and without a debug file. Every
// thread's user stack must hold gdb's frames (its non-inlined ones: same
// functions, same order): at least 95% of gdb's named frames overall, and
// no frame gdb does not show. gdb's tail-call frames, which it makes up
// from DWARF call-site data and which are on no stack, are counted apart.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"
#include "symbolize/elf_file.h"
#include "symbolize/proc_maps.h"

namespace offcpu {
namespace {

// One of gdb's frames that is not an inlined one.
struct GdbFrame {
  std::string name; // empty: gdb has no name (??, <signal handler called>)
  std::string type; // NORMAL, TAILCALL, SIGTRAMP
};

// Prints, per thread, "T <tid> <name>" then "F <type> <function>" per
// frame, leaf first, skipping inlined frames (their function is the
// enclosing real frame's).
const char *kGdbScript = R"(
import gdb
gdb.execute("set backtrace past-main on")
gdb.execute("set backtrace past-entry on")
for t in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
    t.switch()
    print("T %d %s" % (t.ptid[1], t.name))
    f = gdb.newest_frame()
    while f is not None:
        kind = f.type()
        if kind != gdb.INLINE_FRAME:
            names = {gdb.NORMAL_FRAME: "NORMAL", gdb.TAILCALL_FRAME: "TAILCALL",
                     gdb.SIGTRAMP_FRAME: "SIGTRAMP"}
            print("F %s %s" % (names.get(kind, "OTHER"), f.name() or ""))
        try:
            f = f.older()
        except gdb.error:
            break
)";

class Unwind : public test::RootTest {
protected:
  void SetUp() override {
    RootTest::SetUp();
    if (IsSkipped())
      return;
    if (access("/usr/bin/gdb", X_OK) != 0)
      GTEST_SKIP() << "gdb is the oracle: apt-get install gdb";
    std::ofstream(dir_ + "/bt.py") << kGdbScript;
  }

  // Thread name -> gdb's frames, leaf first.
  std::map<std::string, std::vector<GdbFrame>> gdb_stacks(int pid) {
    auto r = test::run({"/usr/bin/gdb", "-p", std::to_string(pid), "-batch",
                        "-nx", "-ex", "source " + dir_ + "/bt.py"},
                       60);
    std::map<std::string, std::vector<GdbFrame>> out;
    std::vector<GdbFrame> *cur = nullptr;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("T ", 0) == 0) {
        std::istringstream f(line.substr(2));
        std::string tid, name;
        f >> tid >> name;
        cur = &out[name];
        cur->clear();
      } else if (line.rfind("F ", 0) == 0 && cur) {
        std::istringstream f(line.substr(2));
        GdbFrame g;
        f >> g.type;
        std::getline(f, g.name);
        if (!g.name.empty() && g.name[0] == ' ')
          g.name.erase(0, 1);
        cur->push_back(g);
      }
    }
    return out;
  }

  // Function names to their addresses in the files the process maps (and
  // their debug files): gdb names a function by its debug info, offcpu by
  // the symbol table, and the two may pick different aliases.
  void learn_symbols(int pid) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::stringstream text;
    text << maps.rdbuf();
    for (const Mapping &m : parse_proc_maps(text.str())) {
      if (!m.executable || !m.is_file() || !files_.insert(m.path).second)
        continue;
      add_symbols(m.path);
      auto elf = ElfFile::open(m.path);
      if (elf && elf->build_id().size() > 2) {
        const std::string &id = elf->build_id();
        add_symbols("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                    id.substr(2) + ".debug");
      }
    }
  }
  // Every alias (nm lists them all; a symbolizer keeps one per address).
  void add_symbols(const std::string &path) {
    for (const char *dyn : {"--defined-only", "--dynamic"}) {
      auto r = test::run({"/usr/bin/nm", dyn, path}, 30);
      std::istringstream in(r.out);
      for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string addr, type, name;
        if (!(f >> addr >> type >> name) ||
            (type != "t" && type != "T" && type != "i" && type != "W"))
          continue;
        size_t at = name.find('@');
        if (at != std::string::npos)
          name.erase(at);
        // One process's files: a name in two of them only makes two names
        // compare unequal.
        addr_of_.emplace(name, std::stoull(addr, nullptr, 16));
        // gdb names GCC's local copies (time_sleep.lto_priv.0, f.part.0)
        // from DWARF, without the suffix (python3.11-dbg's debug file).
        size_t dot = name.find('.');
        if (dot != std::string::npos && dot > 0)
          addr_of_.emplace(name.substr(0, dot), std::stoull(addr, nullptr, 16));
      }
    }
  }

  std::string identity(std::string name) const {
    size_t at = name.find('@');
    if (at != std::string::npos)
      name.erase(at);
    size_t paren = name.find('(');
    if (paren != std::string::npos && paren > 0)
      name.erase(paren);
    auto it = addr_of_.find(name);
    return it == addr_of_.end() ? name : "@" + std::to_string(it->second);
  }

  struct Score {
    size_t gdb_named = 0, recovered = 0, extra = 0, tailcalls_missed = 0;
    std::string report;
  };

  // Aligns offcpu's frames (leaf first) with gdb's, in order.
  void compare(const std::string &thread, const std::vector<std::string> &ours,
               const std::vector<GdbFrame> &gdb, Score &s) const {
    auto unnamed = [](const std::string &n) {
      return n.empty() || n[0] == '[';
    };
    auto match = [&](const std::string &o, const GdbFrame &g) {
      if (g.name.empty())
        return true; // gdb cannot name it: any frame of ours there
      return !unnamed(o) && identity(o) == identity(g.name);
    };
    size_t n = ours.size(), m = gdb.size();
    std::vector<std::vector<int>> best(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        best[i][j] =
            std::max({best[i + 1][j], best[i][j + 1],
                      match(ours[i], gdb[j]) ? best[i + 1][j + 1] + 1 : 0});
    size_t i = 0, j = 0, matched = 0;
    std::vector<bool> got(m, false);
    while (i < n && j < m) {
      if (match(ours[i], gdb[j]) && best[i][j] == best[i + 1][j + 1] + 1) {
        got[j] = true;
        matched++;
        i++, j++;
      } else if (best[i][j] == best[i + 1][j]) {
        i++;
      } else {
        j++;
      }
    }
    std::string line = thread + ": ours";
    for (const auto &o : ours)
      line += " " + o;
    line += " | gdb";
    for (size_t k = 0; k < m; k++) {
      line += " " + (gdb[k].name.empty() ? "??" : gdb[k].name) +
              (gdb[k].type == "TAILCALL" ? "(tail)" : "") +
              (got[k] ? "" : "(MISSED)");
      // gdb makes up frames for tail calls from DWARF call-site data; they
      // are on no stack, so no walker can find them: reported apart.
      if (gdb[k].type == "TAILCALL") {
        s.tailcalls_missed += !got[k];
        continue;
      }
      if (!gdb[k].name.empty()) {
        s.gdb_named++;
        s.recovered += got[k];
      }
    }
    s.extra += n - matched;
    s.report += line + "\n";
  }

  // Traces `pid` for 2 s with user stacks only; checks each thread named
  // in `threads` (all of gdb's when empty) against gdb.
  Score check_process(int pid, std::vector<std::string> threads = {},
                      std::vector<std::string> extra = {}) {
    auto gdb = gdb_stacks(pid);
    learn_symbols(pid);
    // --no-inline: gdb's inlined frames are left out above (issue #31's
    // inline_truth_test.cpp compares those).
    std::vector<std::string> args = {
        OFFCPU_BIN, "-p", std::to_string(pid), "-U", "-f", "-v", "--no-inline"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("2");
    auto r = test::run(args, 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    err_ = r.err;
    // The heaviest line of each thread: it was blocked all the window.
    std::map<std::string, const test::FoldedLine *> heaviest;
    auto lines = test::parse_folded(r.out);
    for (const auto &l : lines) {
      auto &h = heaviest[l.frames[0]];
      if (!h || l.value > h->value)
        h = &l;
    }
    if (threads.empty())
      for (const auto &[name, frames] : gdb)
        threads.push_back(name);
    Score s;
    for (const std::string &t : threads) {
      auto g = gdb.find(t);
      auto h = heaviest.find(t.substr(0, 15));
      if (g == gdb.end() || h == heaviest.end()) {
        ADD_FAILURE() << "thread " << t << " missing: gdb " << (g != gdb.end())
                      << ", offcpu " << (h != heaviest.end()) << "\n"
                      << r.out;
        continue;
      }
      std::vector<std::string> ours(h->second->frames.rbegin(),
                                    h->second->frames.rend() - 1);
      compare(t, ours, g->second, s);
    }
    std::cerr << s.report << "gdb named frames " << s.gdb_named
              << ", recovered " << s.recovered << "; frames gdb does not "
              << "show: " << s.extra << "; gdb's tail-call frames (on no "
              << "stack): " << s.tailcalls_missed << "\n";
    return s;
  }

  void expect_good(const Score &s) {
    ASSERT_GT(s.gdb_named, 0u) << s.report;
    EXPECT_GE(static_cast<double>(s.recovered),
              0.95 * static_cast<double>(s.gdb_named))
        << s.report << err_;
    EXPECT_EQ(s.extra, 0u) << s.report;
  }

  // Starts a workload that prints "ready PID".
  int start(test::Subprocess &w) {
    auto line = w.read_line(20);
    if (!line || line->rfind("ready ", 0) != 0)
      return -1;
    test::sleep_seconds(0.2);
    return std::stoi(line->substr(6));
  }

  // A copy of the nofp workload, stripped; with its debug file beside it
  // (found through .gnu_debuglink) when `debug_file`.
  std::string stripped_copy(const std::string &bin, bool debug_file) {
    std::string copy = dir_ + "/nofp_stripped";
    std::string debug = copy + ".debug";
    EXPECT_EQ(
        test::run({"/usr/bin/objcopy", "--only-keep-debug", bin, debug}, 30)
            .exit_code,
        0);
    EXPECT_EQ(test::run({"/usr/bin/strip", "-o", copy, bin}, 30).exit_code, 0);
    EXPECT_EQ(
        test::run({"/usr/bin/objcopy", "--add-gnu-debuglink=" + debug, copy},
                  30)
            .exit_code,
        0);
    if (!debug_file)
      unlink(debug.c_str());
    chmod(copy.c_str(), 0755);
    return copy;
  }

  std::string err_;
  std::set<std::string> files_;
  std::map<std::string, uint64_t> addr_of_;
};

const std::vector<std::string> kNofpThreads = {
    "offcpu_nofp", "nf_sleep", "nf_read", "nf_cond", "nf_signal", "nf_dlopen"};

// The nofp workload built and stripped several ways; each case is one
// way its CFI reaches offcpu.
enum Strip { AsBuilt, StrippedWithDebugFile, StrippedAlone };
struct NofpCase {
  const char *name;   // the test's name
  const char *binary; // as built
  Strip strip;
  const char *main; // the main thread's name (comm: 15 bytes)
  // Regexes -v's stderr must match (null: none).
  const char *stderr_has = nullptr, *stderr_also = nullptr;
};

void PrintTo(const NofpCase &c, std::ostream *os) {
  *os << c.name;
}

const NofpCase kNofpCases[] = {
    // The whole stack came from the tables, built for -p before the window
    // opened: no walk came before them.
    {"FramelessProgram", WORKLOAD_NOFP, AsBuilt, "offcpu_nofp",
     "user stacks by unwind tables",
     "readiness: 0 walks before their process's tables"},
    {"NonPieExecutable", WORKLOAD_NOFP_NOPIE, AsBuilt, "offcpu_nofp_nop"},
    {"StrippedWithDebugFile", WORKLOAD_NOFP, StrippedWithDebugFile,
     "nofp_stripped"},
    // Stripped and no debug file: gdb names only the libraries' frames, and
    // offcpu must still walk through the program's own (its .eh_frame
    // stays).
    {"StrippedWithoutDebugFile", WORKLOAD_NOFP, StrippedAlone, "nofp_stripped"},
    // CFI only in .debug_frame, which stripping moves to the debug file.
    {"DebugFrameFromTheDebugFile", WORKLOAD_NOFP_DEBUGFRAME,
     StrippedWithDebugFile, "nofp_stripped", "\\(1 from \\.debug_frame\\)"},
};

class NofpVsGdb : public Unwind,
                  public ::testing::WithParamInterface<NofpCase> {};

TEST_P(NofpVsGdb, MatchesGdb) {
  const NofpCase &c = GetParam();
  std::string bin = c.binary;
  if (c.strip != AsBuilt)
    bin = stripped_copy(bin, c.strip == StrippedWithDebugFile);
  test::Subprocess w({bin, WORKLOAD_NOFP_LIB});
  int pid = start(w);
  ASSERT_GT(pid, 0);
  std::vector<std::string> threads = kNofpThreads;
  threads[0] = c.main;
  expect_good(check_process(pid, threads));
  for (const char *re : {c.stderr_has, c.stderr_also}) {
    if (!re)
      continue;
    EXPECT_TRUE(std::regex_search(err_, std::regex(re))) << re << "\n" << err_;
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, NofpVsGdb, ::testing::ValuesIn(kNofpCases),
                         [](const ::testing::TestParamInfo<NofpCase> &i) {
                           return std::string(i.param.name);
                         });

TEST_F(Unwind, BashWaitingOnAChildMatchesGdb) {
  test::Subprocess w({"/bin/bash", "-c", "echo ready $$; sleep 100; true"});
  int pid = start(w);
  ASSERT_GT(pid, 0);
  expect_good(check_process(pid));
}

TEST_F(Unwind, Python3SleepingThreadsMatchGdb) {
  if (access("/usr/bin/python3", X_OK) != 0)
    GTEST_SKIP();
  test::Subprocess w(
      {"/usr/bin/python3", "-c",
       "import os, threading, time\n"
       "def nap():\n    time.sleep(100)\n"
       "for i in range(3):\n"
       "    threading.Thread(target=nap, name='nap%d' % i).start()\n"
       "print('ready', os.getpid(), flush=True)\n"
       "time.sleep(100)\n"});
  int pid = start(w);
  ASSERT_GT(pid, 0);
  // --no-python: gdb's native frames, the interpreter's among them (the
  // Python frames in their place are python_frames_test.cpp's).
  expect_good(check_process(pid, {}, {"--no-python"}));
}

// The frame-pointer walk is still there to compare with: through glibc's
// frameless wrappers it loses the callers the tables recover.
TEST_F(Unwind, FramePointerWalkCanBeForced) {
  test::Subprocess w({WORKLOAD_NOFP, WORKLOAD_NOFP_LIB});
  int pid = start(w);
  ASSERT_GT(pid, 0);
  Score fp = check_process(pid, kNofpThreads, {"--user-unwind", "fp"});
  EXPECT_NE(err_.find("user stacks by frame-pointer walk"), std::string::npos)
      << err_;
  EXPECT_EQ(err_.find("user unwind tables:"), std::string::npos) << err_;
  EXPECT_LT(fp.recovered * 2, fp.gdb_named) << fp.report;
}

} // namespace
} // namespace offcpu
