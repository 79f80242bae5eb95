// Inlined frames and source lines (issue #31) against gdb's backtrace of
// the same blocked threads, the oracle: a workload built -O2 -g whose
// threads block at the bottom of always_inline chains, above glibc and its
// own inlined functions (libc6-dbg). gdb's frames, inlined ones included
// (its tail-call frames, made up from DWARF call-site data and on no
// stack, left out), must be among offcpu's in the same order: at least 95%
// of them, and 95% of their file:line, for the workload's code and for
// glibc's apart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "symbolize/elf_file.h"
#include "symbolize/proc_maps.h"

namespace offcpu {
namespace {

// Per thread "T <tid> <name>", then per frame, leaf first,
// "F <I|N>|<function>|<file>|<line>" (I: inlined).
const char *kGdbScript = R"(
import gdb
for t in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
    t.switch()
    print("T %d %s" % (t.ptid[1], t.name))
    f = gdb.newest_frame()
    while f is not None:
        if f.type() != gdb.TAILCALL_FRAME:
            sal = f.find_sal()
            path = sal.symtab.filename if sal.symtab else ""
            kind = "I" if f.type() == gdb.INLINE_FRAME else "N"
            print("F %s|%s|%s|%d" % (kind, f.name() or "", path, sal.line))
        try:
            f = f.older()
        except gdb.error:
            break
)";

struct Position {
  std::string function;
  std::string file; // base name; empty: unknown
  int line = 0;
};

std::string base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "function (file.c:123)" as --lines names a frame.
Position parse_frame(const std::string &name) {
  Position p{name, "", 0};
  size_t open = name.rfind(" (");
  size_t colon = name.rfind(':');
  if (open == std::string::npos || colon == std::string::npos || colon < open ||
      name.back() != ')')
    return p;
  const std::string digits = name.substr(colon + 1, name.size() - colon - 2);
  if (digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return p;
  p.function = name.substr(0, open);
  p.file = name.substr(open + 2, colon - open - 2);
  p.line = std::stoi(digits);
  return p;
}

class InlineTruth : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
    if (access("/usr/bin/gdb", X_OK) != 0)
      GTEST_SKIP() << "gdb is the oracle: apt-get install gdb";
    char tmpl[] = "/tmp/offcpu-inline-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/bt.py") << kGdbScript;
  }
  void TearDown() override {
    if (!dir_.empty())
      test::run({"/bin/rm", "-rf", dir_}, 10);
  }

  std::map<std::string, std::vector<Position>> gdb_stacks(int pid) {
    auto r = test::run({"/usr/bin/gdb", "-p", std::to_string(pid), "-batch",
                        "-nx", "-ex", "source " + dir_ + "/bt.py"},
                       60);
    std::map<std::string, std::vector<Position>> out;
    std::vector<Position> *cur = nullptr, *cur_tid = nullptr;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("T ", 0) == 0) {
        std::istringstream f(line.substr(2));
        std::string tid, name;
        f >> tid >> name;
        // By name and by thread id ("#TID"): python's threads share one.
        cur = &out[name];
        cur->clear();
        cur_tid = &by_tid_["#" + tid];
      } else if (line.rfind("F ", 0) == 0 && cur) {
        std::vector<std::string> parts;
        std::istringstream f(line.substr(2));
        for (std::string part; std::getline(f, part, '|');)
          parts.push_back(part);
        if (parts.size() != 4)
          continue;
        cur->push_back({parts[1], base_name(parts[2]), std::stoi(parts[3])});
        if (cur_tid)
          cur_tid->push_back(cur->back());
      }
    }
    return out;
  }

  // gdb names a function from DWARF, offcpu an out-of-line one from the
  // symbol table, and each may pick another alias of one address
  // (__GI___poll, __poll): names compare by address where one is known.
  void learn_symbols(int pid) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::stringstream text;
    text << maps.rdbuf();
    std::set<std::string> seen;
    for (const Mapping &m : parse_proc_maps(text.str())) {
      if (!m.executable || !m.is_file() || !seen.insert(m.path).second)
        continue;
      add_symbols(m.path, m.path);
      auto elf = ElfFile::open(m.path);
      if (elf && elf->build_id().size() > 2) {
        const std::string &id = elf->build_id();
        add_symbols(m.path, "/usr/lib/debug/.build-id/" + id.substr(0, 2) +
                                "/" + id.substr(2) + ".debug");
      }
    }
  }
  // Every alias, static and dynamic, of `file` (read from `path`: itself
  // or its debug file).
  void add_symbols(const std::string &file, const std::string &path) {
    for (const char *which : {"--defined-only", "--dynamic"}) {
      auto r = test::run({"/usr/bin/nm", which, path}, 30);
      std::istringstream in(r.out);
      for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string addr, type, name;
        if (!(f >> addr >> type >> name) ||
            (type != "t" && type != "T" && type != "i" && type != "W"))
          continue;
        name = name.substr(0, name.find('@'));
        addr_of_.emplace(name, file + "@" + addr);
        // gdb names GCC's local copies (f.lto_priv.0, f.part.0) from DWARF,
        // without the suffix.
        size_t dot = name.find('.');
        if (dot != std::string::npos && dot > 0)
          addr_of_.emplace(name.substr(0, dot), file + "@" + addr);
      }
    }
  }
  std::string identity(const std::string &name) const {
    auto it = addr_of_.find(name);
    return it == addr_of_.end() ? name : it->second;
  }

  struct Score {
    size_t frames = 0, found = 0, lines = 0, lines_right = 0;
  };

  // Aligns offcpu's frames (leaf first) with gdb's, in order (the longest
  // common subsequence of functions), and scores what was found.
  void compare(const std::string &thread, const std::vector<Position> &ours,
               const std::vector<Position> &gdb) {
    // A GCC clone (f.constprop.0, f.lto_priv.0) is named by its symbol in
    // offcpu and from DWARF, without the suffix, in gdb: the same code,
    // though the plain name's address may be another copy's.
    auto base = [](const std::string &name) {
      return name.substr(0, name.find('.'));
    };
    auto same = [&](const Position &o, const Position &g) {
      return !o.function.empty() && o.function[0] != '[' &&
             (identity(o.function) == identity(g.function) ||
              (o.function.find('.') != std::string::npos &&
               base(o.function) == g.function));
    };
    size_t n = ours.size(), m = gdb.size();
    std::vector<std::vector<int>> best(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        best[i][j] =
            std::max({best[i + 1][j], best[i][j + 1],
                      same(ours[i], gdb[j]) ? best[i + 1][j + 1] + 1 : 0});
    std::vector<const Position *> match(m, nullptr);
    for (size_t i = 0, j = 0; i < n && j < m;) {
      if (same(ours[i], gdb[j]) && best[i][j] == best[i + 1][j + 1] + 1)
        match[j++] = &ours[i++];
      else if (best[i][j] == best[i + 1][j])
        i++;
      else
        j++;
    }
    report_ += thread + ": ours";
    for (const Position &o : ours)
      report_ += " " + o.function + "@" + o.file + ":" + std::to_string(o.line);
    report_ += "\n  gdb";
    for (size_t k = 0; k < m; k++) {
      const Position &g = gdb[k];
      if (g.function.empty())
        continue; // gdb cannot name it
      // Where the code is: the workload's own, or glibc's.
      Score &s = g.file == "inlined.c" ? workload_ : glibc_;
      s.frames++;
      s.found += match[k] != nullptr;
      bool line_right = false;
      if (g.line > 0) {
        s.lines++;
        line_right =
            match[k] && match[k]->file == g.file && match[k]->line == g.line;
        s.lines_right += line_right;
      }
      report_ += " " + g.function + "@" + g.file + ":" +
                 std::to_string(g.line) + (match[k] ? "" : "(MISSED)") +
                 (g.line > 0 && !line_right ? "(LINE)" : "");
    }
    report_ += "\n";
  }

  static void expect_good(const Score &s, const char *what,
                          const std::string &report) {
    ASSERT_GT(s.frames, 0u) << what << "\n" << report;
    EXPECT_GE(static_cast<double>(s.found), 0.95 * s.frames)
        << what << ": frames\n"
        << report;
    EXPECT_GE(static_cast<double>(s.lines_right), 0.95 * s.lines)
        << what << ": lines\n"
        << report;
  }

  std::map<std::string, std::vector<Position>> by_tid_;
  std::string dir_, report_;
  std::map<std::string, std::string> addr_of_;
  Score workload_, glibc_;
};

const std::vector<std::string> kThreads = {"in_poll", "in_sleep", "in_cond",
                                           "in_read"};

TEST_F(InlineTruth, InlinedFramesAndLinesMatchGdb) {
  test::Subprocess w({WORKLOAD_INLINED});
  auto ready = w.read_line(20);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  const int pid = std::stoi(ready->substr(6));
  test::sleep_seconds(0.2);
  auto gdb = gdb_stacks(pid);
  learn_symbols(pid);
  // --name-time 3: python3.11's DWARF (11 MB, compressed) takes a few
  // tenths of a second to open, more on a loaded machine; this test is
  // about what is named, not when.
  auto r = test::run({OFFCPU_BIN, "-p", std::to_string(pid), "-U", "-f",
                      "--lines", "--per-thread", "--name-time", "3", "2"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Each thread's heaviest stack: it was blocked all the window.
  std::map<std::string, const test::FoldedLine *> heaviest;
  auto lines = test::parse_folded(r.out);
  for (const auto &l : lines) {
    std::string comm = l.frames[0].substr(0, l.frames[0].find('-'));
    auto &h = heaviest[comm];
    if (!h || l.value > h->value)
      h = &l;
  }
  for (const std::string &t : kThreads) {
    auto g = gdb.find(t);
    auto h = heaviest.find(t);
    ASSERT_TRUE(g != gdb.end() && h != heaviest.end()) << t << "\n" << r.out;
    std::vector<Position> ours;
    for (auto it = h->second->frames.rbegin();
         it + 1 != h->second->frames.rend(); ++it)
      ours.push_back(parse_frame(*it));
    compare(t, ours, g->second);
  }
  std::cerr << report_ << "workload: " << workload_.found << "/"
            << workload_.frames << " frames, " << workload_.lines_right << "/"
            << workload_.lines << " lines; glibc: " << glibc_.found << "/"
            << glibc_.frames << " frames, " << glibc_.lines_right << "/"
            << glibc_.lines << " lines\n";
  expect_good(workload_, "the workload's code", report_);
  expect_good(glibc_, "glibc (libc6-dbg)", report_);
  // Inlined calls were shown at all (else the chains' frames are missing).
  EXPECT_NE(r.out.find("poll_middle (inlined.c:"), std::string::npos) << r.out;
}

// --no-inline: the holders only, as before issue #31.
TEST_F(InlineTruth, NoInlineLeavesInlinedCallsOut) {
  test::Subprocess w({WORKLOAD_INLINED});
  auto ready = w.read_line(20);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  const int pid = std::stoi(ready->substr(6));
  auto r = test::run(
      {OFFCPU_BIN, "-p", std::to_string(pid), "-U", "-f", "--no-inline", "1"},
      60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(";poll_loop;"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("poll_middle"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inlined.c"), std::string::npos) << r.out;
  auto d =
      test::run({OFFCPU_BIN, "-p", std::to_string(pid), "-U", "-f", "1"}, 60);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find(";poll_loop;poll_outer;poll_middle;poll_forever;"),
            std::string::npos)
      << d.out;
}

// Debian's python3.11 with python3.11-dbg (its DWARF, by debuglink):
// threads in time.sleep, select.select and a lock's acquire, the
// interpreter's own inlined functions and glibc's below them.
TEST_F(InlineTruth, Python3MatchesGdb) {
  const char *python = "/usr/bin/python3.11";
  auto elf = ElfFile::open(python);
  ASSERT_TRUE(elf && elf->build_id().size() > 2);
  const std::string &id = elf->build_id();
  if (access(("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
              id.substr(2) + ".debug")
                 .c_str(),
             R_OK) != 0)
    GTEST_SKIP() << "python3.11's debug file: apt-get install python3.11-dbg";
  std::ofstream(dir_ + "/threads.py") << R"(
import os, select, threading, time
def sleeper(): time.sleep(1000)
def selecter():
    r, w = os.pipe()
    select.select([r], [], [])
def locker():
    l = threading.Lock()
    l.acquire()
    l.acquire()
for f in (sleeper, selecter, locker):
    threading.Thread(target=f, daemon=True).start()
time.sleep(0.3)
print("ready", os.getpid(), flush=True)
time.sleep(1000)
)";
  test::Subprocess w({python, dir_ + "/threads.py"});
  auto ready = w.read_line(20);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  const int pid = std::stoi(ready->substr(6));
  test::sleep_seconds(0.2);
  auto gdb = gdb_stacks(pid);
  learn_symbols(pid);
  // --name-time 3: python3.11's DWARF (11 MB, compressed) takes a few
  // tenths of a second to open, more on a loaded machine; this test is
  // about what is named, not when.
  auto r =
      test::run({OFFCPU_BIN, "-p", std::to_string(pid), "-U", "-f", "--lines",
                 "--per-thread", "--name-time", "3", "--no-python", "2"},
                60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Each thread's heaviest stack, by thread id ("python3-PID/TID").
  std::map<std::string, const test::FoldedLine *> heaviest;
  auto lines = test::parse_folded(r.out);
  for (const auto &l : lines) {
    auto &h = heaviest["#" + l.frames[0].substr(l.frames[0].find('/') + 1)];
    if (!h || l.value > h->value)
      h = &l;
  }
  size_t threads = 0;
  for (const auto &[tid, frames] : by_tid_) {
    auto h = heaviest.find(tid);
    if (h == heaviest.end())
      continue;
    threads++;
    std::vector<Position> ours;
    for (auto it = h->second->frames.rbegin();
         it + 1 != h->second->frames.rend(); ++it)
      ours.push_back(parse_frame(*it));
    compare("python3 " + tid, ours, frames);
  }
  EXPECT_GE(threads, 4u) << r.out;
  Score all = glibc_;
  all.frames += workload_.frames;
  all.found += workload_.found;
  all.lines += workload_.lines;
  all.lines_right += workload_.lines_right;
  std::cerr << report_ << "python3.11 and glibc: " << all.found << "/"
            << all.frames << " frames, " << all.lines_right << "/" << all.lines
            << " lines\n";
  expect_good(all, "python3.11 (python3.11-dbg) and glibc", report_);
}

} // namespace
} // namespace offcpu
