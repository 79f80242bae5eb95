// The timeline of long waits against a workload that knows its truth
// (workloads/timeline.c): a request thread woken by a worker after a 50 ms
// "I/O" that a timer ends. The request's wait must be one event at the
// moment the workload measured (+-2 ms), on its stack, woken by the worker
// from send_reply, with the worker's slow_io wait as its chain's first hop,
// woken by a timer; the JSON has the tracks and the arrow.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "support/json.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

// What the workload printed: TID START_NS END_NS.
struct Span {
  int tid = 0;
  double start_us = 0, end_us = 0;
};

Span span_of(const std::string &out, const std::string &what) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string tag;
    unsigned long long start = 0, end = 0;
    Span s;
    if (words >> tag >> s.tid >> start >> end && tag == what) {
      s.start_us = static_cast<double>(start) / 1000;
      s.end_us = static_cast<double>(end) / 1000;
      return s;
    }
  }
  return {};
}

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

class Timeline : public test::RootTest {
protected:
  void SetUp() override {
    test::RootTest::SetUp();
    if (IsSkipped())
      return;
    json_ = dir_ + "/trace.json";
    // The workload's lines and --top-waits share stdout.
    run_ = test::run({OFFCPU_BIN, "-q", "-o", json_, "-o", dir_ + "/out.txt",
                      "-o", dir_ + "/trace.perfetto-trace", "--top-waits", "10",
                      "--", WORKLOAD_TIMELINE},
                     60);
    ASSERT_EQ(run_.exit_code, 0) << run_.err;
    request_ = span_of(run_.out, "request");
    io_ = span_of(run_.out, "io");
    ASSERT_NE(request_.tid, 0) << run_.out;
    ASSERT_NE(io_.tid, 0) << run_.out;
    trace_ = test::parse_json(read_file(json_));
  }

  // The request thread's longest wait.
  const test::Json *request_wait() const {
    const test::Json *best = nullptr;
    for (const test::Json &e : trace_["traceEvents"].array)
      if (e["ph"].string == "X" && e["cat"].string == "offcpu" &&
          e["tid"].number == request_.tid &&
          (!best || e["dur"].number > (*best)["dur"].number))
        best = &e;
    return best;
  }

  std::string json_;
  test::RunResult run_;
  Span request_, io_;
  test::Json trace_;
};

TEST_F(Timeline, TheSlowRequestIsOneEventAtItsMomentWithWakerAndChain) {
  const test::Json *w = request_wait();
  ASSERT_NE(w, nullptr) << read_file(json_).substr(0, 2000);
  const test::Json &e = *w;
  // When: it ends when the worker woke it, within 2 ms of the moment the
  // worker measured slow_io's return; it began when the request blocked.
  const double end_us = e["ts"].number + e["dur"].number;
  EXPECT_NEAR(end_us, io_.end_us, 2000) << "event ends " << end_us;
  EXPECT_NEAR(e["ts"].number, request_.start_us, 2000);
  EXPECT_GT(e["dur"].number, 50000);
  const test::Json &args = e["args"];
  // Named after its innermost named user function: the last user frame
  // (glibc's futex wait, under wait_for_reply), before the system call.
  EXPECT_TRUE(
      contains(args["stack"].string, e["name"].string + ";entry_SYSCALL_64"))
      << e["name"].string << " in " << args["stack"].string;
  EXPECT_EQ(args["state"].string, "S");
  EXPECT_TRUE(contains(args["stack"].string, "request_main;wait_for_reply"))
      << args["stack"].string;
  EXPECT_EQ(args["waker"].string, "worker-" + std::to_string(io_.tid));
  EXPECT_TRUE(contains(args["waker_stack"].string, "send_reply"))
      << args["waker_stack"].string;
  EXPECT_TRUE(contains(args["waker_stack"].string, "worker_main"))
      << args["waker_stack"].string;
  // The chain: the worker's own wait before it woke the request was the
  // 50 ms nanosleep of slow_io, which a timer ended.
  ASSERT_GE(args["chain"].array.size(), 1u) << read_file(json_).size();
  const test::Json &hop = args["chain"].array[0];
  EXPECT_EQ(hop["thread"].string, "worker-" + std::to_string(io_.tid));
  EXPECT_TRUE(contains(hop["stack"].string, "slow_io")) << hop["stack"].string;
  EXPECT_NEAR(hop["duration_us"].number, 50000, 5000);
  EXPECT_NEAR(hop["start_us"].number, io_.start_us, 2000);
  EXPECT_EQ(hop["waker"].string, "[timer]");
}

TEST_F(Timeline, TracksNamedAndTheWakeupDrawnAsAnArrow) {
  const std::string rtid = std::to_string(request_.tid);
  bool request_track = false, worker_track = false, process = false;
  const test::Json *start = nullptr, *finish = nullptr;
  for (const test::Json &e : trace_["traceEvents"].array) {
    const std::string ph = e["ph"].string;
    if (ph == "M" && e["name"].string == "thread_name") {
      request_track |= e["args"]["name"].string == "request-" + rtid;
      worker_track |=
          e["args"]["name"].string == "worker-" + std::to_string(io_.tid);
    }
    if (ph == "M" && e["name"].string == "process_name")
      process |= e["args"]["name"].string == "offcpu_timeline";
    if (ph == "f" && e["tid"].number == request_.tid &&
        std::abs(e["ts"].number - io_.end_us) < 2000)
      finish = &e;
  }
  EXPECT_TRUE(request_track && worker_track && process);
  ASSERT_NE(finish, nullptr);
  for (const test::Json &e : trace_["traceEvents"].array)
    if (e["ph"].string == "s" && e["id"].number == (*finish)["id"].number)
      start = &e;
  ASSERT_NE(start, nullptr);
  EXPECT_EQ((*start)["tid"].number, io_.tid);
  EXPECT_LE((*start)["ts"].number, (*finish)["ts"].number);
  EXPECT_EQ(trace_["otherData"]["clock"].string, "CLOCK_MONOTONIC");
  EXPECT_TRUE(trace_["otherData"].has("realtime_offset_ns"));
  // The other outputs are the usual ones, and count the wait too.
  EXPECT_TRUE(contains(read_file(dir_ + "/out.txt"), "wait_for_reply"));
}

// Decoded by protoc against Perfetto's own schema (tests/data/perfetto):
// the tracks, the request's slice with its annotations, the flow.
TEST_F(Timeline, PerfettoTraceDecodesAgainstPerfettosSchema) {
  if (access("/usr/bin/protoc", X_OK) != 0)
    GTEST_SKIP() << "protoc absent (Debian protobuf-compiler, "
                    "tools/install-deps.sh installs it)";
  auto r =
      test::run({"/bin/sh", "-c",
                 "protoc --decode=perfetto.protos.Trace -I " OFFCPU_SOURCE_DIR
                 "/tests/data/perfetto "
                 "perfetto_trace.proto < " +
                     dir_ + "/trace.perfetto-trace"},
                60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string &t = r.out;
  const std::string rtid = std::to_string(request_.tid);
  EXPECT_TRUE(contains(t, "tid: " + rtid)) << t.substr(0, 3000);
  EXPECT_TRUE(contains(t, "thread_name: \"request\""));
  EXPECT_TRUE(contains(t, "thread_name: \"worker\""));
  EXPECT_TRUE(contains(t, "process_name: \"offcpu_timeline\""));
  const test::Json *w = request_wait();
  ASSERT_NE(w, nullptr);
  const std::string slice = "name: \"" + (*w)["name"].string + "\"";
  EXPECT_TRUE(contains(t, slice)) << slice;
  EXPECT_TRUE(contains(t, "type: TYPE_SLICE_BEGIN"));
  EXPECT_TRUE(contains(t, "type: TYPE_SLICE_END"));
  EXPECT_TRUE(contains(t, "flow_ids:"));
  EXPECT_TRUE(contains(t, "terminating_flow_ids:"));
  EXPECT_TRUE(contains(t, "name: \"waker_stack\""));
  EXPECT_TRUE(contains(t, "string_value: \"worker-" + std::to_string(io_.tid)))
      << "the request's waker";
  EXPECT_TRUE(contains(t, "clock_snapshot"));
  EXPECT_TRUE(contains(t, "timestamp_clock_id: 3"));
  EXPECT_TRUE(contains(t, "wait_for_reply")) << "the request's stack";
  // The request's slice begins when it blocked (CLOCK_MONOTONIC ns).
  const std::string begin =
      "timestamp: " +
      std::to_string(static_cast<uint64_t>((*w)["ts"].number * 1000 + 0.5));
  EXPECT_TRUE(contains(t, begin.substr(0, begin.size() - 4)))
      << begin << " (to the microsecond)";
}

TEST_F(Timeline, TopWaitsPrintTheRequestWithItsChain) {
  const std::string out = run_.out;
  size_t at = out.find("request-" + std::to_string(request_.tid));
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_TRUE(contains(out.substr(at), "woken by worker-")) << out;
  EXPECT_TRUE(contains(out.substr(at), "chain 1: worker-")) << out;
  EXPECT_TRUE(contains(out, "Longest waits")) << out;
}

} // namespace
} // namespace offcpu
