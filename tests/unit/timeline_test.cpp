// The timeline's options and writers, without the kernel: which outputs
// turn it on, and what the JSON and the chain text hold for a known wait.
#include <gtest/gtest.h>

#include "cli/options.h"
#include "collect/timeline_events.h"
#include "model/timeline.h"
#include "output/perfetto.h"
#include "output/top_waits.h"
#include "output/trace_json.h"
#include "util/error.h"

namespace offcpu {
namespace {

CommandLine parse(std::vector<const char *> args) {
  args.insert(args.begin(), "offcpu");
  return parse_command_line(static_cast<int>(args.size()), args.data(),
                            [](uint32_t) { return true; });
}

TEST(TimelineOptions, TraceSuffixesAndTopWaitsTurnItOn) {
  EXPECT_FALSE(parse({"-o", "x.svg"}).profile.events);
  auto json = parse({"-o", "x.json"}).profile;
  EXPECT_TRUE(json.events);
  EXPECT_EQ(json.output.targets[0].format, OutputFormat::TraceJson);
  EXPECT_EQ(parse({"-o", "x.pftrace"}).profile.output.targets[0].format,
            OutputFormat::Perfetto);
  EXPECT_EQ(parse({"-o", "x.perfetto-trace"}).profile.output.targets[0].format,
            OutputFormat::Perfetto);
  auto top =
      parse({"--top-waits", "5", "--events-min", "2000", "--chain-depth", "1"})
          .profile;
  EXPECT_TRUE(top.events);
  EXPECT_EQ(top.top_waits, 5u);
  EXPECT_EQ(top.events_min_us, 2000u);
  EXPECT_EQ(top.chain_depth, 1u);
  EXPECT_EQ(parse({}).profile.events_min_us, 1000u);
}

TEST(TimelineOptions, OtherCommandsRefuseIt) {
  try {
    parse({"rwsem", "mysqld", "-o", "x.json"});
    FAIL() << "rwsem accepted a timeline";
  } catch (const FatalError &e) {
    EXPECT_NE(std::string(e.what()).find("no timeline"), std::string::npos);
  }
}

TEST(TimelineOptions, RingIsASixteenthPowerOfTwo) {
  EXPECT_EQ(timeline_ring_bytes(64), 4u << 20);
  EXPECT_EQ(timeline_ring_bytes(1), 1u << 20);
  EXPECT_EQ(timeline_ring_bytes(65536), 256u << 20);
}

Frame frame(const char *name, FrameKind kind) {
  Frame f;
  f.name = name;
  f.kind = kind;
  return f;
}

Timeline one_wait() {
  Timeline t;
  TimelineWait w;
  w.tgid = 10;
  w.tid = 11;
  w.comm = "request";
  w.start_ns = 5000000;
  w.duration_ns = 80000000;
  w.runq_ns = 2000;
  w.state = 'S';
  TimelineStack st;
  st.user = {frame("main", FrameKind::User), frame("wait;it", FrameKind::User),
             frame("[libc.so.6]", FrameKind::User)};
  st.kernel = {frame("schedule", FrameKind::Kernel)};
  t.stacks.push_back(st);
  w.stack = 1;
  w.waker.kind = Waker::Kind::Task;
  w.waker.tgid = 10;
  w.waker.tid = 12;
  w.waker.comm = "worker";
  TimelineHop h;
  h.tid = 12;
  h.comm = "worker";
  h.duration_ns = 50000000;
  h.state = 'S';
  h.waker.kind = Waker::Kind::Timer;
  w.chain.push_back(h);
  t.waits.push_back(w);
  t.processes = {{10, "server"}};
  return t;
}

TEST(TimelineOutput, JsonHasTracksSliceArgsAndArrow) {
  const std::string j = render_trace_json(one_wait());
  EXPECT_NE(j.find("\"process_name\",\"pid\":10,\"tid\":10,\"args\":{"
                   "\"name\":\"server\"}"),
            std::string::npos)
      << j;
  // Named after the innermost named user function; ';' in a name becomes
  // ':' as in folded output; microseconds with ns precision.
  EXPECT_NE(j.find("\"name\":\"wait:it\",\"pid\":10,\"tid\":11,\"ts\":5000.000,"
                   "\"dur\":80000.000"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"stack\":\"main;wait:it;[libc.so.6];schedule\""),
            std::string::npos);
  EXPECT_NE(j.find("\"waker\":\"worker-12\""), std::string::npos);
  EXPECT_NE(j.find("\"runqueue_us\":2.000"), std::string::npos);
  EXPECT_NE(j.find("\"waker\":\"[timer]\"}]"), std::string::npos) << j;
  EXPECT_NE(j.find("{\"ph\":\"s\""), std::string::npos);
  EXPECT_NE(j.find("{\"ph\":\"f\",\"bp\":\"e\""), std::string::npos);
  EXPECT_NE(j.find("\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\""),
            std::string::npos);
}

TEST(TimelineOutput, TopWaitsLongestFirstWithChain) {
  Timeline t = one_wait();
  TimelineWait shorter = t.waits[0];
  shorter.tid = 13;
  shorter.duration_ns = 2000000;
  t.waits.insert(t.waits.begin(), shorter);
  const std::string s = render_top_waits(t, 1);
  EXPECT_NE(s.find("request-11 (PID 10)  80.000 ms  [S]"), std::string::npos)
      << s;
  EXPECT_EQ(s.find("request-13"), std::string::npos) << s;
  EXPECT_NE(s.find("chain 1: worker-12 waited 50.000 ms"), std::string::npos);
  EXPECT_NE(s.find("woken by [timer]"), std::string::npos);
}

// A thread that named itself after a first long wait (a page fault at its
// start) is named on its track as it was at its last.
TEST(TimelineOutput, ThreadTrackNamedAsAtItsLastWait) {
  Timeline t = one_wait();
  TimelineWait early = t.waits[0];
  early.comm = "server";
  early.start_ns = 1000;
  early.duration_ns = 2000000;
  t.waits.insert(t.waits.begin(), early);
  const std::string j = render_trace_json(t);
  EXPECT_NE(j.find("\"thread_name\",\"pid\":10,\"tid\":11,\"args\":{"
                   "\"name\":\"request-11\"}"),
            std::string::npos)
      << j;
  EXPECT_EQ(j.find("\"args\":{\"name\":\"server-11\"}"), std::string::npos)
      << j;
  const std::string p = render_perfetto(t);
  EXPECT_NE(p.find("request"), std::string::npos);
}

size_t occurrences(const std::string &s, const std::string &part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos;
       at = s.find(part, at + 1))
    n++;
  return n;
}

// Waits on one stack share it: the stack's text, its frames' names and its
// callstack are written once, however many waits refer to them.
TEST(TimelineOutput, PerfettoWritesEachStackOnce) {
  Timeline t = one_wait();
  for (int i = 1; i <= 99; i++) {
    TimelineWait w = t.waits[0];
    w.start_ns += static_cast<uint64_t>(i) * 100000000;
    t.waits.push_back(w);
  }
  const std::string p = render_perfetto(t);
  EXPECT_EQ(occurrences(p, "main;wait:it;[libc.so.6];schedule"), 1u);
  EXPECT_EQ(occurrences(p, "[libc.so.6]"), 2u) << "the text, the frame name";
  EXPECT_EQ(occurrences(p, "schedule"), 2u);
}

} // namespace
} // namespace offcpu
