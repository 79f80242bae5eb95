// Python frames (issue #32) checked against gdb's py-bt (python3.11-dbg's
// gdb extension) on the same blocked threads of Debian's python3.11, and a
// process whose frame chain is garbage: bounded, counted, and no harm to
// the stacks of another Python process traced with it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

const char *kPython = "/usr/bin/python3.11";
const std::string kWorkloads =
    std::string(OFFCPU_SOURCE_DIR) + "/tests/workloads/";

struct PyFrame {
  std::string function, file; // file: base name
  int line = 0;
  bool operator==(const PyFrame &o) const {
    return function == o.function && file == o.file && line == o.line;
  }
};

std::string base_name(const std::string &p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string describe(const std::vector<PyFrame> &v) {
  std::string out;
  for (const PyFrame &f : v)
    out += f.function + "(" + f.file + ":" + std::to_string(f.line) + ") ";
  return out;
}

// gdb's py-bt of every thread: by thread id, root first.
std::map<std::string, std::vector<PyFrame>> gdb_python_stacks(int pid) {
  auto r = test::run({"/usr/bin/gdb", "-p", std::to_string(pid), "-batch",
                      "-ex", "thread apply all py-bt"},
                     60);
  std::map<std::string, std::vector<PyFrame>> out;
  std::vector<PyFrame> *cur = nullptr;
  std::regex thread(R"(^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\))");
  std::regex file(R"re(^  File "([^"]+)", line (\d+), in (\S+))re");
  std::istringstream in(r.out);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, thread))
      cur = &out[m[1]];
    else if (cur && std::regex_search(line, m, file))
      cur->insert(cur->begin(), {m[3], base_name(m[1]), std::stoi(m[2])});
  }
  return out;
}

// The Python frames of a folded line, root first: "Class.func (file.py:12)"
// as gdb names it ("func": the code object's name, not its qualified one).
std::vector<PyFrame> python_frames(const test::FoldedLine &l) {
  std::vector<PyFrame> out;
  std::regex py(R"(^(\S+) \(([^:()]+\.py):(\d+)\)$)");
  std::smatch m;
  for (size_t i = 1; i < l.frames.size(); i++)
    if (std::regex_match(l.frames[i], m, py)) {
      std::string q = m[1];
      out.push_back({q.substr(q.rfind('.') + 1), m[2], std::stoi(m[3])});
    }
  return out;
}

struct Started {
  int pid = 0;
  std::map<std::string, std::string> tids; // "sleep" -> "1234"
};

Started start_waits(test::Subprocess &w) {
  Started s;
  auto ready = w.read_line(30);
  if (!ready || ready->rfind("ready ", 0) != 0)
    return s;
  std::istringstream in(ready->substr(6));
  in >> s.pid;
  for (std::string kv; in >> kv;)
    s.tids[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  return s;
}

// Both objects walk Python frames: the default (with plain loads on 6.8+,
// reading the interpreter's memory through the page tables) and the one
// with probe reads (kernels before 6.8).
class PythonFrames : public test::RootTest,
                     public ::testing::WithParamInterface<const char *> {
protected:
  // offcpu's arguments: `args`, then the loader this run tests, then the
  // duration.
  std::vector<std::string> offcpu(std::vector<std::string> args,
                                  const char *secs) const {
    args.insert(args.begin(), OFFCPU_BIN);
    if (*GetParam())
      args.push_back(GetParam());
    args.push_back(secs);
    return args;
  }

  // The default run loaded the object with plain loads (else the test
  // would pass on a fallback: that object's Python walk went unchecked).
  void expect_loader(const std::string &err) const {
    if (!*GetParam())
      EXPECT_NE(err.find("kernel memory by plain loads"), std::string::npos)
          << err;
  }

  void SetUp() override {
    RootTest::SetUp();
    if (IsSkipped())
      return;
    if (access(kPython, X_OK) != 0)
      GTEST_SKIP() << "no " << kPython;
  }

  // Each thread of `s`: the share of its off-CPU time whose Python frames
  // are gdb's, in order; and that gdb saw the workload's own two functions.
  void expect_chains(const Started &s, const std::string &folded) {
    auto gdb = gdb_python_stacks(s.pid);
    auto lines = test::parse_folded(folded);
    for (const auto &[what, tid] : s.tids) {
      const auto &want = gdb[tid];
      std::string chain = describe(want);
      EXPECT_NE(chain.find(what + "_outer(py_waits.py"), std::string::npos)
          << what << ": gdb's py-bt: " << chain;
      EXPECT_NE(chain.find(what + "_inner(py_waits.py"), std::string::npos)
          << what << ": gdb's py-bt: " << chain;
      uint64_t total = 0, right = 0;
      std::string seen;
      for (const auto &l : lines) {
        const std::string &t = l.frames[0];
        if (t.size() < tid.size() + 1 ||
            t.compare(t.size() - tid.size() - 1, std::string::npos,
                      "/" + tid) != 0)
          continue;
        total += l.value;
        auto ours = python_frames(l);
        if (ours == want)
          right += l.value;
        else
          seen += describe(ours) + " " + std::to_string(l.value) + "\n";
      }
      ASSERT_GT(total, 0u) << what << " thread " << tid << "\n" << folded;
      EXPECT_GE(static_cast<double>(right), 0.95 * static_cast<double>(total))
          << what << ": " << right << " of " << total << " us with gdb's chain "
          << chain << "\nothers:\n"
          << seen;
    }
  }
};

// The Python chain of each thread (time.sleep, queue.get, socket.recv, a
// held lock, under two functions of the workload's own) is gdb's, frame
// for frame with lines, on >= 95% of the thread's off-CPU time; the
// native frames above and below stay.
TEST_P(PythonFrames, ChainsMatchGdbPyBt) {
  test::Subprocess w({kPython, kWorkloads + "py_waits.py"});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0);
  ASSERT_EQ(s.tids.size(), 4u);
  auto r = test::run(
      offcpu({"-p", std::to_string(s.pid), "-U", "-f", "--per-thread", "-v"},
             "3"),
      90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_loader(r.err);
  expect_chains(s, r.out);
  // The interpreter's evaluation frames gave way to the Python ones; the
  // start-up frames above and libc's below are still there.
  EXPECT_NE(r.out.find("start_thread;"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(";clock_nanosleep"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sleep_inner (py_waits.py:"), std::string::npos);
  EXPECT_NE(r.err.find("offcpu: Python: "), std::string::npos) << r.err;
  // --no-python: the interpreter's frames as before.
  auto n = test::run(
      offcpu({"-p", std::to_string(s.pid), "-U", "-f", "--no-python"}, "1"),
      90);
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(n.out.find("py_waits.py"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("_PyEval_EvalFrameDefault"), std::string::npos);
}

// A thread whose two innermost frames call each other and point at a code
// object nowhere: its walk stops at the frame limit, the unreadable code is
// counted and shown as such, offcpu exits cleanly, and a second Python
// process traced in the same run keeps its true chains.
TEST_P(PythonFrames, GarbageChainIsBoundedAndHarmless) {
  test::Subprocess bad({kPython, kWorkloads + "py_poisoned.py"});
  auto ready = bad.read_line(30);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  std::istringstream in(ready->substr(6));
  std::string bad_pid, bad_tid;
  in >> bad_pid >> bad_tid;
  test::Subprocess w({kPython, kWorkloads + "py_waits.py"});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0);
  auto r = test::run(offcpu({"-p", bad_pid + "," + std::to_string(s.pid), "-U",
                             "-f", "--per-thread", "-v"},
                            "3"),
                     90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_loader(r.err);
  expect_chains(s, r.out);
  // The loop was cut at the limit and said so.
  EXPECT_NE(r.err.find("offcpu: warning: Python frames lost"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("[unknown Python code]"), std::string::npos) << r.out;
  EXPECT_EQ(bad.pid() > 0, true);
}

INSTANTIATE_TEST_SUITE_P(Loaders, PythonFrames,
                         ::testing::Values("", "--loader=light-probe-reads"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(*i.param ? "ProbeReads"
                                                       : "Default");
                         });

} // namespace
} // namespace offcpu
