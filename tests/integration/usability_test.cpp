// What users met on real hosts (issue #27, bugs 5, 7 and 8): a thread's id
// given to -p, a name that never matches, typos; text entries that print
// alike; the --show-state frame's place; pprof that `go tool pprof` reads as
// a user would (-list, -symbolize=force, folded -d input); modules named by
// the path a process ran. The real binary against tests/workloads/usability.c.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"
#include "symbolize/elf_file.h"

namespace offcpu {
namespace {

constexpr const char *kGo = "/usr/bin/go";

size_t lines(const std::string &s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    n++;
  return n;
}

// The usability workload: its PID and its helper thread's TID.
struct Workload {
  explicit Workload(const std::string &binary = WORKLOAD_USABILITY)
      : proc({binary, "sites"}) {
    auto line = proc.read_line(20);
    if (!line || line->rfind("ready ", 0) != 0)
      throw std::runtime_error("usability workload did not start");
    std::istringstream in(line->substr(6));
    in >> pid >> helper;
  }
  test::Subprocess proc;
  int pid = 0, helper = 0;
};

class Usability : public test::RootTest {
protected:
  static test::RunResult offcpu(std::vector<std::string> args,
                                int expect_exit = 0) {
    args.insert(args.begin(), OFFCPU_BIN);
    auto r = test::run(args, 90);
    EXPECT_EQ(r.exit_code, expect_exit) << args[1] << ": " << r.err;
    return r;
  }
  static test::RunResult go_pprof(std::vector<std::string> args) {
    args.insert(args.begin(), {kGo, "tool", "pprof"});
    return test::run(args, 120);
  }
};

// A usage error: exit 2, one line on stderr naming what to do, no output.
void expect_usage_error(const test::RunResult &r, const std::string &says) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(Usability, ThreadGivenToPidIsToldToUseTid) {
  Workload w;
  const std::string tid = std::to_string(w.helper);
  auto r = test::run({OFFCPU_BIN, "-p", tid, "1"}, 60);
  expect_usage_error(r, tid + " is a thread of process " +
                            std::to_string(w.pid) + ": use -t " + tid);
  // What the message advises works: the helper's own stacks.
  auto folded = test::parse_folded(offcpu({"-t", tid, "-f", "1"}).out);
  ASSERT_FALSE(folded.empty());
  const test::FoldedLine *heaviest = &folded[0];
  for (const auto &l : folded) {
    EXPECT_EQ(l.frames[0], "helper") << l.text;
    if (l.value > heaviest->value)
      heaviest = &l;
  }
  EXPECT_GE(test::frame_index(*heaviest, "helper_wait"), 0) << heaviest->text;
}

TEST_F(Usability, NameThatNeverMatchesIsSaid) {
  auto r = offcpu({"-n", "no-such-proc-x", "1"});
  EXPECT_NE(r.err.find("no process named 'no-such-proc-x' waited off CPU"),
            std::string::npos)
      << r.err;
  // A name that matches: no such line, and the process's stacks.
  Workload w;
  std::ifstream comm_file("/proc/" + std::to_string(w.pid) + "/comm");
  std::string comm;
  std::getline(comm_file, comm);
  auto found = offcpu({"-n", comm, "-f", "1"});
  EXPECT_EQ(found.err.find("no process named"), std::string::npos) << found.err;
  EXPECT_NE(found.out.find("wait_twice"), std::string::npos) << found.out;
}

TEST_F(Usability, PathGivenToNameAsksForTheComm) {
  expect_usage_error(
      test::run({OFFCPU_BIN, "-n", "/usr/bin/redis-server", "1"}, 30),
      "use -n redis-server");
  expect_usage_error(
      test::run({OFFCPU_BIN, "rwsem", "/usr/sbin/a-very-long-daemon-name"}, 30),
      "use rwsem a-very-long-dae");
}

TEST_F(Usability, TyposGetTheOptionMeant) {
  expect_usage_error(test::run({OFFCPU_BIN, "--wakerz", "1"}, 30),
                     "did you mean --wakers?");
  expect_usage_error(test::run({OFFCPU_BIN, "--show-sate", "1"}, 30),
                     "did you mean --show-state?");
  expect_usage_error(test::run({OFFCPU_BIN, "-pid", "1234"}, 30),
                     "did you mean --pid?");
  expect_usage_error(
      test::run({OFFCPU_BIN, "flamegraph", "-output", "x.svg"}, 30),
      "did you mean --output?");
}

// The main thread sleeps from two call sites of one function: two raw
// stacks, one printed stack, one entry with both sites' waits; no two
// entries print alike.
TEST_F(Usability, TextReportMergesStacksThatPrintAlike) {
  Workload w;
  const std::string pid = std::to_string(w.pid);
  auto text = offcpu({"-p", pid, "2"}).out;
  // Each entry: its printed lines but the totals.
  std::istringstream in(text);
  std::string entry, line;
  std::vector<std::string> entries;
  while (std::getline(in, line)) {
    if (line.empty()) {
      entries.push_back(entry);
      entry.clear();
    } else if (line.rfind("        ", 0) != 0) {
      entry += line + "\n";
    }
  }
  std::set<std::string> distinct(entries.begin(), entries.end());
  EXPECT_EQ(distinct.size(), entries.size()) << "entries that print alike:\n"
                                             << text;
  // The whole stack of a sleep (a wait walked before the tables were ready
  // may stop short of _start, a preemption has another kernel path: other
  // printed stacks, other entries).
  size_t main_entries = 0;
  for (const auto &e : entries)
    main_entries += e.find("    do_nanosleep\n") != std::string::npos &&
                    e.find("    nap\n    wait_twice\n    main\n    "
                           "__libc_start_call_main\n    __libc_start_main\n"
                           "    _start\n") != std::string::npos;
  EXPECT_EQ(main_entries, 1u) << text;
}

// --show-state: the state right under the thread, as the README says, in
// folded and text (pprof and SVG draw the same layout).
TEST_F(Usability, ShowStateSitsUnderTheThread) {
  Workload w;
  const std::string pid = std::to_string(w.pid);
  auto folded =
      test::parse_folded(offcpu({"-p", pid, "--show-state", "-f", "1"}).out);
  ASSERT_FALSE(folded.empty());
  for (const auto &l : folded) {
    ASSERT_GE(l.frames.size(), 3u) << l.text;
    EXPECT_TRUE(std::regex_match(l.frames[1], std::regex("\\[[RSDIT]\\]")))
        << l.text;
  }
  auto text = offcpu({"-p", pid, "--show-state", "1"}).out;
  EXPECT_TRUE(std::regex_search(
      text, std::regex("\n    \\[S\\]\n    -                helper \\(")))
      << text;
  for (const char *state : {"    [S]\n", "    [R]\n"})
    EXPECT_EQ(occurrences(text, std::string(state) + "    -                "),
              occurrences(text, state))
        << text;
}

TEST_F(Usability, PprofListShowsNoBinaryAsSource) {
  if (access(kGo, X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed";
  Workload w;
  const std::string pb = dir_ + "/p.pb.gz";
  offcpu({"-p", std::to_string(w.pid), "-o", pb, "1"});
  auto list = go_pprof({"-list", "^wait_twice$", pb});
  EXPECT_EQ(list.out.find("ELF"), std::string::npos)
      << "pprof printed the binary as source:\n"
      << list.out.substr(0, 2000);
  // Named again from the binary's DWARF, pprof finds the real source, both
  // call sites with their own time.
  auto forced =
      go_pprof({"-symbolize=force", "-source_path", OFFCPU_SOURCE_DIR "/tests",
                "-list", "^wait_twice$", pb});
  EXPECT_TRUE(std::regex_search(forced.out,
                                std::regex("ms +[0-9]+: +nap\\(2000000\\);")))
      << forced.out;
  EXPECT_TRUE(std::regex_search(forced.out,
                                std::regex("ms +[0-9]+: +nap\\(3000000\\);")))
      << forced.out;
}

// The separate debug file of the libc a process maps (Debian's libc6-dbg),
// or "" if there is none.
std::string libc_debug_file(int pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    size_t at = line.find('/');
    if (at == std::string::npos || line.find("/libc.so") == std::string::npos)
      continue;
    auto elf = ElfFile::open(line.substr(at));
    const std::string id = elf ? elf->build_id() : "";
    if (id.size() < 3)
      return {};
    std::string debug = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                        id.substr(2) + ".debug";
    return access(debug.c_str(), R_OK) == 0 ? debug : "";
  }
  return {};
}

// --no-symbolize: go tool pprof names every user frame from the files,
// as a user runs it, with -symbolize=force too; libc (stripped) from its
// debug file, where one is installed.
TEST_F(Usability, UnsymbolizedPprofIsNamedByGoPprof) {
  if (access(kGo, X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed";
  Workload w;
  const std::string pb = dir_ + "/raw.pb.gz";
  offcpu({"-p", std::to_string(w.pid), "--no-symbolize", "-o", pb, "1"});
  for (const char *mode : {"-symbolize=force", "-symbolize=local"}) {
    auto top = go_pprof({mode, "-top", "-nodecount=1000", pb});
    ASSERT_EQ(top.exit_code, 0) << mode << ": " << top.err;
    // (Not main: in .text.startup, go tool pprof's DWARF reader misses it.)
    for (const char *fn : {"wait_twice", "helper_wait", "nap", "helper"})
      EXPECT_TRUE(std::regex_search(
          top.out, std::regex(std::string("%\\s+") + fn + "\n")))
          << mode << ": " << fn << " not named:\n"
          << top.out << top.err;
    if (!libc_debug_file(w.pid).empty()) {
      EXPECT_TRUE(std::regex_search(top.out, std::regex("%\\s+__nanosleep\n")))
          << mode << ": libc not named:\n"
          << top.out << top.err;
      EXPECT_EQ(top.out.find("[libc.so"), std::string::npos) << top.out;
    }
    EXPECT_EQ(top.out.find("+0x"), std::string::npos) << top.out;
  }
}

// offcpu flamegraph of -d folded text: "-" separates user from kernel
// frames; in pprof it is no function (it would be in every stack: 100%).
TEST_F(Usability, DelimiterOfFoldedInputIsNoFunction) {
  if (access(kGo, X_OK) != 0)
    GTEST_SKIP() << "go (Debian package golang-go) is not installed";
  Workload w;
  const std::string folded = dir_ + "/d.folded", pb = dir_ + "/d.pb.gz",
                    svg = dir_ + "/d.svg";
  offcpu({"-p", std::to_string(w.pid), "-d", "-o", folded, "1"});
  offcpu({"flamegraph", folded, "-o", pb, "-o", svg});
  auto top = go_pprof({"-top", "-nodecount=1000", pb});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_FALSE(std::regex_search(top.out, std::regex("%\\s+-\n"))) << top.out;
  EXPECT_TRUE(std::regex_search(top.out, std::regex("%\\s+wait_twice\n")))
      << top.out;
}

// A binary run through a symlink or a hard link of another name: its
// module is named by that name (what the user ran, what ps shows), in
// folded --no-symbolize frames and pprof's main file.
TEST_F(Usability, ModuleNamedByThePathRun) {
  const std::string hard = dir_ + "/hard-named-app",
                    soft = dir_ + "/soft-named-app";
  if (link(WORKLOAD_USABILITY, hard.c_str()) != 0)
    test::run({"/bin/cp", WORKLOAD_USABILITY, hard}, 30); // another fs
  ASSERT_EQ(symlink(WORKLOAD_USABILITY, soft.c_str()), 0);
  for (const std::string &path : {hard, soft}) {
    const std::string name = path.substr(path.rfind('/') + 1);
    Workload w(path);
    const std::string pid = std::to_string(w.pid), pb = dir_ + "/m.pb.gz";
    auto folded =
        offcpu({"-p", pid, "--no-symbolize", "-f", "-o", "-", "-o", pb, "1"})
            .out;
    EXPECT_NE(folded.find(";" + name + "+0x"), std::string::npos)
        << name << ":\n"
        << folded;
    EXPECT_EQ(folded.find(";offcpu_usability+0x"), std::string::npos)
        << name << ":\n"
        << folded;
    if (access(kGo, X_OK) != 0)
      continue;
    auto top = go_pprof({"-top", pb});
    EXPECT_NE(top.out.find("File: " + name + "\n"), std::string::npos)
        << top.out;
    EXPECT_NE(top.out.find("wait_twice"), std::string::npos) << top.out;
  }
}

} // namespace
} // namespace offcpu
