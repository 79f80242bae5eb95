// The timeline of long waits against a workload that knows its truth
// (workloads/timeline.c): a request thread woken by a worker after a 50 ms
// "I/O" that a timer ends. The request's wait must be one event at the
// moment the workload measured (+-2 ms), on its stack, woken by the worker
// from send_reply, with the worker's slow_io wait as its chain's first hop,
// woken by a timer; the JSON has the tracks and the arrow.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "support/chromium.h"
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

// The issue's +-2 ms about the moments the workload measured.
constexpr double kSlackUs = 2000;

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

std::string base64(const std::string &in) {
  static const char digits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(in[i]) << 16 |
                                       static_cast<uint8_t>(in[i + 1]) << 8 |
                                       static_cast<uint8_t>(in[i + 2]));
    for (int shift : {18, 12, 6, 0})
      out += digits[(v >> shift) & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(in[i]) << 16);
    if (i + 1 < in.size())
      v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i + 1]) << 8);
    out += digits[(v >> 18) & 63];
    out += digits[(v >> 12) & 63];
    out += i + 1 < in.size() ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
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
    waiting_ = span_of(run_.out, "waiting");
    io_ = span_of(run_.out, "io");
    reply_ = span_of(run_.out, "reply");
    ASSERT_NE(request_.tid, 0) << run_.out;
    ASSERT_NE(io_.tid, 0) << run_.out;
    ASSERT_NE(waiting_.tid, 0) << run_.out;
    ASSERT_NE(reply_.tid, 0) << run_.out;
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
  Span request_, waiting_, io_, reply_;
  test::Json trace_;
};

TEST_F(Timeline, TheSlowRequestIsOneEventAtItsMomentWithWakerAndChain) {
  const test::Json *w = request_wait();
  ASSERT_NE(w, nullptr) << read_file(json_).substr(0, 2000);
  const test::Json &e = *w;
  // When, by the workload's clocks, which hold on a loaded machine where a
  // thread can wait for a CPU for milliseconds at any point: the wait began
  // once the request was about to block and before the I/O began; the
  // wakeup (its end less the run-queue time) fell between slow_io's return
  // and send_reply's; it ended before the request read its clock again.
  // Each within the 2 ms: a switch-in the kernel did not report to
  // the programs (another BPF program was running on that CPU) is recovered
  // from the scheduler's accounting, not to the microsecond.
  const double start = e["ts"].number, end = start + e["dur"].number;
  const double woke = end - e["args"]["runqueue_us"].number;
  const std::string truth = "event " + std::to_string(start) + " +" +
                            std::to_string(e["dur"].number) + " woken at " +
                            std::to_string(woke) + "\n" + run_.out;
  EXPECT_GE(start, waiting_.start_us - kSlackUs) << truth;
  EXPECT_LE(start, io_.start_us + kSlackUs) << truth;
  EXPECT_GE(woke, io_.end_us - kSlackUs) << truth;
  EXPECT_LE(woke, reply_.end_us + kSlackUs) << truth;
  EXPECT_LE(end, request_.end_us + kSlackUs) << truth;
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
  // Inside slow_io as the worker timed it, and at least its 50 ms sleep.
  const std::string hop_truth =
      "hop " + std::to_string(hop["start_us"].number) + " +" +
      std::to_string(hop["duration_us"].number) + "\n" + run_.out;
  EXPECT_GE(hop["duration_us"].number, 50000) << hop_truth;
  EXPECT_GE(hop["start_us"].number, io_.start_us - kSlackUs) << hop_truth;
  EXPECT_LE(hop["start_us"].number + hop["duration_us"].number,
            io_.end_us + kSlackUs)
      << hop_truth;
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
    // The arrow's end, bound to the end of the request's wait: after the
    // I/O, before the request went on.
    if (ph == "f" && e["tid"].number == request_.tid &&
        e["ts"].number >= io_.end_us - kSlackUs &&
        e["ts"].number <= request_.end_us + kSlackUs)
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
  // The stacks as interned callstacks: each frame's name once, each stack
  // once, the slices referring to them (and their texts interned too).
  EXPECT_TRUE(contains(t, "callstack_iid:"));
  EXPECT_TRUE(contains(t, "callstacks {"));
  EXPECT_TRUE(contains(t, "frame_ids:"));
  EXPECT_TRUE(contains(t, "function_names {"));
  EXPECT_TRUE(contains(t, "str: \"wait_for_reply\""));
  EXPECT_TRUE(contains(t, "debug_annotation_string_values {"));
  EXPECT_TRUE(contains(t, "string_value_iid:"));
  // The request's slice begins when it blocked (CLOCK_MONOTONIC ns).
  const std::string begin =
      "timestamp: " +
      std::to_string(static_cast<uint64_t>((*w)["ts"].number * 1000 + 0.5));
  EXPECT_TRUE(contains(t, begin.substr(0, begin.size() - 4)))
      << begin << " (to the microsecond)";
}

// What a decoded trace gives the annotation named `name` of the "events
// lost" instant (its iid from the interned names), or -1.
long long lost_annotation(const std::string &decoded, const std::string &name) {
  std::smatch m;
  if (!std::regex_search(decoded, m,
                         std::regex("iid: ([0-9]+)\\s+name: \"" + name + "\"")))
    return -1;
  const std::string iid = m[1];
  if (!std::regex_search(decoded, m,
                         std::regex("debug_annotations \\{\\s*name_iid: " +
                                    iid + "\\s+uint_value: ([0-9]+)")))
    return -1;
  return std::stoll(m[1]);
}

// Events dropped, and the traces say so: 8 threads sleeping 1 ms again and
// again, each wait an event (--events-min 1), at --events-memory 1 (8,192
// events): past the cap they are dropped and counted, in the JSON's
// otherData, on stderr, and in the Perfetto trace as an "events lost"
// instant with the same counts, which protoc decodes against Perfetto's
// schema.
TEST(TimelineLoss, DroppedEventsAreInBothTraces) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root";
  if (access("/usr/bin/protoc", X_OK) != 0)
    GTEST_SKIP() << "protoc absent (Debian protobuf-compiler, "
                    "tools/install-deps.sh installs it)";
  char tmpl[] = "/tmp/offcpu-timeline-loss-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  test::Subprocess w({WORKLOAD_SLEEPERS, "saturate", "8", "1"});
  auto ready = w.read_line(20);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0);
  const std::string pid = ready->substr(6);
  auto r = test::run({OFFCPU_BIN, "-q", "-p", pid, "--events-min", "1",
                      "--events-memory", "1", "-o", dir + "/t.json", "-o",
                      dir + "/t.perfetto-trace", "-o", dir + "/out.txt", "4"},
                     120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const test::Json trace = test::parse_json(read_file(dir + "/t.json"));
  const double ring = trace["otherData"]["events_lost_ring"].number;
  const double memory = trace["otherData"]["events_lost_memory"].number;
  EXPECT_GT(ring + memory, 0) << "no event dropped: " << r.err;
  if (memory > 0) {
    EXPECT_TRUE(contains(r.err, "timeline events")) << r.err;
  }
  auto d =
      test::run({"/bin/sh", "-c",
                 "protoc --decode=perfetto.protos.Trace -I " OFFCPU_SOURCE_DIR
                 "/tests/data/perfetto perfetto_trace.proto < " +
                     dir + "/t.perfetto-trace"},
                60);
  test::run({"/bin/rm", "-rf", dir}, 30);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(contains(d.out, "name: \"offcpu: events lost\""));
  EXPECT_TRUE(contains(d.out, "name: \"events lost\""));
  EXPECT_EQ(lost_annotation(d.out, "events_lost_ring"),
            static_cast<long long>(ring));
  EXPECT_EQ(lost_annotation(d.out, "events_lost_memory"),
            static_cast<long long>(memory));
  if (memory > 0) {
    EXPECT_GT(lost_annotation(d.out, "events_lost_memory_ns"), 0);
  }
}

// Nothing dropped, nothing said: the request's run has no such instant.
TEST_F(Timeline, PerfettoTraceHasNoLossRecordWhenNothingWasLost) {
  if (access("/usr/bin/protoc", X_OK) != 0)
    GTEST_SKIP() << "protoc absent";
  ASSERT_EQ(trace_["otherData"]["events_lost_ring"].number, 0);
  ASSERT_EQ(trace_["otherData"]["events_lost_memory"].number, 0);
  auto r =
      test::run({"/bin/sh", "-c",
                 "protoc --decode=perfetto.protos.Trace -I " OFFCPU_SOURCE_DIR
                 "/tests/data/perfetto perfetto_trace.proto < " +
                     dir_ + "/trace.perfetto-trace"},
                60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "events lost"));
}

// The JSON opened in speedscope (installed from npm by
// tools/install-deps.sh) in headless Chromium, as its command line tool
// opens a file: a script that hands speedscope the file's bytes. Speedscope
// makes a profile of each thread track: the request's and the worker's must
// be among them, named after their process and thread, as many as the
// threads with slices; on the request's, the sandwich view lists its slice
// under the name the JSON gives it, with its stack; the time-order view's
// screenshot (kept as /tmp/offcpu-timeline-speedscope.png) shows it drawn.
TEST_F(Timeline, OpensInSpeedscopeWithTheThreadTracks) {
  const std::string release = OFFCPU_SPEEDSCOPE_DIR "/dist/release";
  if (!test::chromium_installed())
    GTEST_SKIP() << "no " << test::kChromium;
  if (access((release + "/index.html").c_str(), R_OK) != 0)
    GTEST_SKIP() << "speedscope absent from " OFFCPU_SPEEDSCOPE_DIR
                    " (tools/install-deps.sh installs it with npm)";
  std::set<std::pair<long, long>> tracks;
  for (const test::Json &e : trace_["traceEvents"].array)
    if (e["ph"].string == "X")
      tracks.insert({static_cast<long>(e["pid"].number),
                     static_cast<long>(e["tid"].number)});
  const std::string process =
      "offcpu_timeline (pid " +
      std::to_string(static_cast<long>(
          request_wait() ? (*request_wait())["pid"].number : 0)) +
      "), ";
  auto track = [&](const std::string &comm, int tid) {
    return process + comm + "-" + std::to_string(tid) + " (tid " +
           std::to_string(tid) + ")";
  };
  const std::string request = track("request", request_.tid);
  // Speedscope's file loader, given the JSON; then, a second apart once it
  // has loaded, `steps` presses of "n" (next profile), each after the page's
  // visible text is copied into a <pre> for the DOM dump to show.
  auto open = [&](int steps, bool log, const std::string &view,
                  const std::string &name) {
    std::string js = "speedscope.loadFileFromBase64(\"trace.json\", \"" +
                     base64(read_file(json_)) + "\");\n";
    js += "function step(log) {\n"
          "  if (log) {\n"
          "    let pre = document.getElementById(\"offcpu-log\");\n"
          "    const text = document.body.firstElementChild.innerText;\n"
          "    if (!pre) {\n"
          "      pre = document.createElement(\"pre\");\n"
          "      pre.id = \"offcpu-log\";\n"
          "      document.body.appendChild(pre);\n"
          "    }\n"
          "    pre.textContent += \"\\n=== step\\n\" + text;\n"
          "  }\n"
          "  window.dispatchEvent(new KeyboardEvent(\"keypress\", "
          "{key: \"n\"}));\n"
          "}\n";
    for (int i = 0; i < steps; i++)
      js += "setTimeout(() => step(" + std::string(log ? "true" : "false") +
            "), " + std::to_string(2000 + 1000 * i) + ");\n";
    std::ofstream(dir_ + "/" + name + ".js") << js;
    return "file://" + release + "/index.html#localProfilePath=" + dir_ + "/" +
           name + ".js" + view;
  };
  const int n = static_cast<int>(tracks.size());
  const int budget = 3000 + 1000 * n;
  auto dom = test::chromium_dom(open(n, true, "&view=sandwich", "all"),
                                dir_ + "/chrome1", budget);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  // Each step: the toolbar's "process (pid P), comm-TID (tid T) (i/N)" and
  // the sandwich view's rows, "name {arguments}" with their times.
  std::vector<std::string> steps;
  const std::string mark = "\n=== step\n";
  for (size_t at = dom.out.find(mark); at != std::string::npos;) {
    size_t next = dom.out.find(mark, at + mark.size());
    steps.push_back(dom.out.substr(
        at + mark.size(), next == std::string::npos ? std::string::npos
                                                    : next - at - mark.size()));
    at = next;
  }
  ASSERT_EQ(steps.size(), tracks.size()) << dom.out.substr(0, 4000);
  // A profile per track, each once, "(i/N)" with N the tracks.
  int shown = -1;
  std::set<std::string> seen;
  for (size_t i = 0; i < steps.size(); i++) {
    const std::string &st = steps[i];
    const std::string count =
        "(" + std::to_string(i + 1) + "/" + std::to_string(tracks.size()) + ")";
    EXPECT_TRUE(contains(st, count)) << count << " in " << st.substr(0, 300);
    seen.insert(st.substr(0, st.find(" (tid ")));
    if (contains(st, request + " " + count))
      shown = static_cast<int>(i);
  }
  EXPECT_EQ(seen.size(), tracks.size());
  ASSERT_GE(shown, 0) << request << " not among the profiles";
  bool worker = false;
  for (const std::string &st : steps)
    worker |= contains(st, track("worker", io_.tid));
  EXPECT_TRUE(worker);
  // On the request's profile, its slice under the name the JSON gives it,
  // with its stack in the arguments.
  const test::Json *w = request_wait();
  ASSERT_NE(w, nullptr);
  const std::string &mine = steps[static_cast<size_t>(shown)];
  EXPECT_TRUE(contains(mine, (*w)["name"].string + " {"))
      << (*w)["name"].string << " in " << mine.substr(0, 2000);
  EXPECT_TRUE(contains(mine, "request_main;wait_for_reply"));
  const int next = shown;
  const std::string png = dir_ + "/speedscope.png";
  auto shot = test::chromium_screenshot(open(next, false, "", "shot"), png,
                                        dir_ + "/chrome2", 3000 + 1000 * next);
  ASSERT_TRUE(shot.image) << "no screenshot: " << shot.log;
  test::run({"/bin/cp", png, "/tmp/offcpu-timeline-speedscope.png"}, 10);
  // Drawn: the minimap and the chart's row, in speedscope's colours (the
  // page is otherwise white, grey and black, but a button).
  const test::Image &img = *shot.image;
  size_t coloured = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    int r = img.rgb[i], g = img.rgb[i + 1], b = img.rgb[i + 2];
    coloured += std::max({r, g, b}) - std::min({r, g, b}) > 30;
  }
  EXPECT_GT(coloured, img.rgb.size() / 3 / 20)
      << "screenshot /tmp/offcpu-timeline-speedscope.png shows no slices";
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
