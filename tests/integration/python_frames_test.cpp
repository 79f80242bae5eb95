// Python frames (issue #32) checked against gdb's py-bt (python3.11-dbg's
// gdb extension) on the same blocked threads of Debian's python3.11, and a
// process whose frame chain is garbage: bounded, counted, and no harm to
// the stacks of another Python process traced with it.
#include <glob.h>
#include <gtest/gtest.h>
#include <signal.h>
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

// gdb's py-bt of every thread: by thread id, root first. `script`: the
// interpreter's gdb extension to load (pyenv's are beside the executable,
// where gdb does not load them by itself); empty: gdb finds it (Debian's
// python3.11-dbg installs it under gdb's auto-load directory).
std::map<std::string, std::vector<PyFrame>>
gdb_python_stacks(int pid, const std::string &script) {
  std::vector<std::string> argv = {"/usr/bin/gdb", "-p", std::to_string(pid),
                                   "-batch"};
  if (!script.empty())
    argv.insert(argv.end(), {"-ex", "source " + script});
  argv.insert(argv.end(), {"-ex", "thread apply all py-bt"});
  auto r = test::run(argv, 60);
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

// Each thread of `s`: the share of its off-CPU time whose Python frames
// are gdb's, in order; and that gdb saw the workload's own two functions.
void expect_chains(const Started &s, const std::string &folded,
                   const std::string &gdb_script = "") {
  auto gdb = gdb_python_stacks(s.pid, gdb_script);
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
          t.compare(t.size() - tid.size() - 1, std::string::npos, "/" + tid) !=
              0)
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

// Tests that need Debian's python3.11 (and root). PythonOther's cases run
// once, on the default loader.
class PythonOther : public test::RootTest {
protected:
  void SetUp() override {
    RootTest::SetUp();
    if (IsSkipped())
      return;
    if (access(kPython, X_OK) != 0)
      GTEST_SKIP() << "no " << kPython;
  }
};

// Both objects walk Python frames: the default (with plain loads on 6.8+,
// reading the interpreter's memory through the page tables) and the one
// with probe reads (kernels before 6.8).
class PythonFrames : public PythonOther,
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
    if (!*GetParam()) {
      EXPECT_NE(err.find("kernel memory by plain loads"), std::string::npos)
          << err;
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

// The same truth for each other version this machine has (pyenv's
// builds, whose interpreter is in libpython3.X.so: the launcher python3.X
// has no _PyRuntime), with each version's own gdb extension.
struct Version {
  const char *name, *python, *gdb_script;
};
const Version kVersions[] = {
    {"3_10", "/root/.pyenv/versions/3.10.13/bin/python3.10",
     "/root/.pyenv/versions/3.10.13/bin/python3.10-gdb.py"},
    {"3_12", "/root/.pyenv/versions/3.12.1/bin/python3.12",
     "/root/.pyenv/versions/3.12.1/bin/python3.12-gdb.py"},
    {"3_13", "/root/.pyenv/versions/3.13.0/bin/python3.13",
     "/root/.pyenv/versions/3.13.0/bin/python3.13-gdb.py"},
};

class PythonVersions : public test::RootTest,
                       public ::testing::WithParamInterface<Version> {};

TEST_P(PythonVersions, ChainsMatchGdbPyBt) {
  const Version &v = GetParam();
  if (access(v.python, X_OK) != 0 || access(v.gdb_script, R_OK) != 0)
    GTEST_SKIP() << "no " << v.python << " with " << v.gdb_script;
  test::Subprocess w({v.python, kWorkloads + "py_waits.py"});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0);
  ASSERT_EQ(s.tids.size(), 4u);
  auto r = test::run({OFFCPU_BIN, "-p", std::to_string(s.pid), "-U", "-f",
                      "--per-thread", "-v", "3"},
                     90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("native frames only"), std::string::npos) << r.err;
  expect_chains(s, r.out, v.gdb_script);
}

INSTANTIATE_TEST_SUITE_P(Pyenv, PythonVersions, ::testing::ValuesIn(kVersions),
                         [](const auto &p) {
                           return std::string(p.param.name);
                         });

// A version with no layout (pyenv's 3.9): one line on stderr, and its
// stacks keep the interpreter's frames, whole.
TEST_F(PythonOther, UnknownVersionGetsNativeFramesAndOneLine) {
  const char *python = "/root/.pyenv/versions/3.9.18/bin/python3.9";
  if (access(python, X_OK) != 0)
    GTEST_SKIP() << "no " << python;
  test::Subprocess w({python, kWorkloads + "py_waits.py"});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0);
  auto r =
      test::run({OFFCPU_BIN, "-p", std::to_string(s.pid), "-U", "-f", "2"}, 90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line = "offcpu: warning: Python 3.9 (";
  size_t at = r.err.find(line);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no layout known, native frames only"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("py_waits.py"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("_PyEval_EvalFrameDefault"), std::string::npos) << r.out;
}

// A Python in a mount namespace of its own (as in a container): the
// interpreter and the script are bind-mounted where offcpu's namespace has
// only empty placeholders, so every path in its maps names the wrong file
// here. The interpreter is found through /proc/PID/map_files, its code
// objects read through /proc/PID/mem: the same chains as gdb's.
TEST_F(PythonOther, InAnotherMountNamespace) {
  std::string exe = dir_ + "/python3.11", app = dir_ + "/app";
  ASSERT_EQ(test::run({"/bin/touch", exe}, 10).exit_code, 0);
  ASSERT_EQ(test::run({"/bin/mkdir", app}, 10).exit_code, 0);
  std::string script = "mount --bind " + std::string(kPython) + " " + exe +
                       " && mount --bind " + kWorkloads + " " + app +
                       " && exec " + exe + " " + app + "/py_waits.py";
  test::Subprocess w({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0) << "unshare -m and mount --bind must work as root";
  // The file named in its maps is the empty placeholder here.
  auto maps = test::run({"/bin/grep", "-m1", "python3.11",
                         "/proc/" + std::to_string(s.pid) + "/maps"},
                        10);
  ASSERT_NE(maps.out.find(exe), std::string::npos) << maps.out;
  auto r = test::run({OFFCPU_BIN, "-p", std::to_string(s.pid), "-U", "-f",
                      "--per-thread", "-v", "3"},
                     90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // gdb does not find python3.11-dbg's extension through the placeholder's
  // path: the workload's own chain is the truth here.
  for (const auto &[what, tid] : s.tids) {
    uint64_t total = 0, right = 0;
    for (const auto &l : test::parse_folded(r.out)) {
      const std::string &t = l.frames[0];
      if (t.size() < tid.size() + 1 ||
          t.compare(t.size() - tid.size() - 1, std::string::npos, "/" + tid))
        continue;
      total += l.value;
      std::regex want("run\\(py_waits\\.py:\\d+\\) " + what +
                      "_outer\\(py_waits\\.py:\\d+\\) " + what +
                      "_inner\\(py_waits\\.py:\\d+\\)");
      if (std::regex_search(describe(python_frames(l)), want))
        right += l.value;
    }
    ASSERT_GT(total, 0u) << what << "\n" << r.out;
    EXPECT_GE(static_cast<double>(right), 0.95 * static_cast<double>(total))
        << what << ": " << right << " of " << total << " us\n"
        << r.out;
  }
}

// A short-lived interpreter: its code objects are read while it lives, as
// its stacks arrive, and named in the output after it has exited.
TEST_F(PythonOther, NamesOfAnExitedProcessAreKept) {
  test::Subprocess w({kPython, kWorkloads + "py_waits.py", "5"});
  Started s = start_waits(w);
  ASSERT_GT(s.pid, 0);
  test::Subprocess tracer(
      {OFFCPU_BIN, "-p", std::to_string(s.pid), "-U", "-f", "-v", "10"});
  auto exited = w.wait(30);
  ASSERT_EQ(exited.exit_code, 0) << exited.err;
  double gone = test::now_seconds();
  auto r = tracer.wait(90);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The tracer was still running when the workload exited: the names were
  // not read at the end.
  EXPECT_GT(test::now_seconds() - gone, 1.0);
  for (const char *what : {"sleep", "queue", "recv", "lock"}) {
    std::string inner = std::string(what) + "_inner (py_waits.py:";
    std::string outer = std::string(what) + "_outer (py_waits.py:";
    size_t i = r.out.find(inner), o = r.out.find(outer);
    EXPECT_NE(i, std::string::npos) << what << "\n" << r.out << r.err;
    EXPECT_NE(o, std::string::npos) << what;
  }
  EXPECT_EQ(r.out.find("[unknown Python code]"), std::string::npos) << r.out;
}

// JIT code of another runtime stays on the perf-map route: node with
// --perf-basic-prof names its JS functions in /tmp/perf-PID.map, and the
// main thread, blocked in Atomics.wait inside js_inner under js_outer,
// shows both, in order, on most of its off-CPU time.
TEST_F(PythonOther, NodePerfMapNamesJsFunctions) {
  const char *node = "/usr/bin/node";
  if (access(node, X_OK) != 0)
    GTEST_SKIP() << "no " << node;
  test::Subprocess w({node, "--perf-basic-prof",
                      "--interpreted-frames-native-stack",
                      kWorkloads + "js_waits.js"});
  auto ready = w.read_line(60);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  std::string pid = ready->substr(6);
  std::string map = "/tmp/perf-" + pid + ".map";
  auto r =
      test::run({OFFCPU_BIN, "-p", pid, "-U", "-f", "--per-thread", "3"}, 90);
  w.signal(SIGKILL);
  unlink(map.c_str()); // node leaves it behind, and a V8 log here
  glob_t logs{};
  if (glob(("isolate-*-" + pid + "-v8.log").c_str(), 0, nullptr, &logs) == 0)
    for (size_t i = 0; i < logs.gl_pathc; i++)
      unlink(logs.gl_pathv[i]);
  globfree(&logs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t total = 0, named = 0;
  for (const auto &l : test::parse_folded(r.out)) {
    const std::string &t = l.frames[0];
    if (t.size() < pid.size() + 1 ||
        t.compare(t.size() - pid.size() - 1, std::string::npos, "/" + pid))
      continue; // not the main thread
    total += l.value;
    size_t outer = l.frames.size(), inner = l.frames.size();
    for (size_t i = 1; i < l.frames.size(); i++) {
      if (l.frames[i].find("js_outer") != std::string::npos &&
          outer == l.frames.size())
        outer = i;
      if (l.frames[i].find("js_inner") != std::string::npos)
        inner = i;
    }
    if (outer < inner && inner < l.frames.size())
      named += l.value;
  }
  ASSERT_GT(total, 0u) << r.out;
  EXPECT_GE(static_cast<double>(named), 0.8 * static_cast<double>(total))
      << named << " of " << total << " us under js_outer;js_inner\n"
      << r.out;
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
