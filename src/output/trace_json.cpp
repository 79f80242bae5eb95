#include "output/trace_json.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

namespace offcpu {
namespace {

void put_string(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      if (c < 0x20) {
        char esc[8];
        snprintf(esc, sizeof(esc), "\\u%04x", c);
        out += esc;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

// Microseconds with nanosecond precision, as the format's ts and dur are.
std::string micros(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  return buf;
}

void put_metadata(std::string &out, const char *what, uint32_t pid,
                  uint32_t tid, const std::string &name) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += what;
  out += "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  put_string(out, name);
  out += "}},\n";
}

void put_hop(std::string &out, const Timeline &t, const TimelineHop &h) {
  out += "{\"thread\":";
  put_string(out, h.comm + "-" + std::to_string(h.tid));
  out += ",\"start_us\":" + micros(h.start_ns) +
         ",\"duration_us\":" + micros(h.duration_ns) + ",\"state\":";
  put_string(out, std::string(1, h.state ? h.state : '?'));
  out += ",\"stack\":";
  put_string(out, joined_stack(t.stack(h.stack)));
  out += ",\"waker\":";
  put_string(out, waker_label(h.waker));
  out += "}";
}

void put_wait(std::string &out, const Timeline &t, const TimelineWait &w,
              uint64_t flow_id) {
  out += "{\"ph\":\"X\",\"cat\":\"offcpu\",\"name\":";
  put_string(out, wait_name(t.stack(w.stack), w.comm));
  out += ",\"pid\":" + std::to_string(w.tgid) +
         ",\"tid\":" + std::to_string(w.tid) + ",\"ts\":" + micros(w.start_ns) +
         ",\"dur\":" + micros(w.duration_ns) + ",\"args\":{\"state\":";
  put_string(out, std::string(1, w.state ? w.state : '?'));
  out += ",\"stack\":";
  put_string(out, joined_stack(t.stack(w.stack)));
  out += ",\"waker\":";
  put_string(out, waker_label(w.waker));
  out += ",\"waker_stack\":";
  put_string(out, joined_stack(t.stack(w.waker.stack)));
  out += ",\"runqueue_us\":" + micros(w.runq_ns) + ",\"chain\":[";
  for (size_t i = 0; i < w.chain.size(); i++) {
    if (i)
      out += ',';
    put_hop(out, t, w.chain[i]);
  }
  out += "]}},\n";
  if (!flow_id || w.waker.kind != Waker::Kind::Task)
    return;
  // The wakeup: a 1 us slice on the waker's track when it woke this wait
  // (its end less the run-queue time), where the arrow starts; the arrow
  // ends in the wait's slice, bound to its end.
  const uint64_t end = w.start_ns + w.duration_ns;
  const uint64_t woke = end - std::min(w.runq_ns, w.duration_ns);
  const std::string from = ",\"pid\":" + std::to_string(w.waker.tgid) +
                           ",\"tid\":" + std::to_string(w.waker.tid);
  out += "{\"ph\":\"X\",\"cat\":\"wakeup\",\"name\":";
  put_string(out, "wakes " + w.comm + "-" + std::to_string(w.tid));
  out += from + ",\"ts\":" + micros(woke) + ",\"dur\":1.000},\n";
  const std::string id = ",\"id\":" + std::to_string(flow_id);
  out += "{\"ph\":\"s\",\"cat\":\"wakeup\",\"name\":\"wakeup\"" + id + from +
         ",\"ts\":" + micros(woke) + "},\n";
  out += "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wakeup\",\"name\":\"wakeup\"" +
         id + ",\"pid\":" + std::to_string(w.tgid) +
         ",\"tid\":" + std::to_string(w.tid) +
         ",\"ts\":" + micros(end > w.start_ns ? end - 1 : end) + "},\n";
}

} // namespace

bool write_trace_json(const Timeline &t, const TextSink &sink) {
  // Written out in pieces as it is made: held whole, the text of a long
  // run's events (hundreds of bytes each) outweighed the events.
  constexpr size_t kPiece = 1 << 20;
  std::string out = "{\"traceEvents\":[\n";
  auto flush = [&](size_t least) {
    if (out.size() < least)
      return true;
    bool ok = sink(out);
    out.clear();
    return ok;
  };
  for (const auto &[tgid, name] : t.processes)
    put_metadata(out, "process_name", tgid, tgid, name);
  // Each thread by its name at its last wait: a thread often names itself
  // after it started, and may have waited before.
  std::map<std::pair<uint32_t, uint32_t>, const std::string *> threads;
  for (const TimelineWait &w : t.waits)
    threads[{w.tgid, w.tid}] = &w.comm;
  for (const auto &[id, comm] : threads) {
    put_metadata(out, "thread_name", id.first, id.second,
                 *comm + "-" + std::to_string(id.second));
    if (!flush(kPiece))
      return false;
  }
  uint64_t flow = 0;
  for (const TimelineWait &w : t.waits) {
    put_wait(out, t, w, ++flow);
    if (!flush(kPiece))
      return false;
  }
  // The last element carries no comma: the clock, for the others.
  out += "{\"ph\":\"M\",\"name\":\"offcpu_clock\",\"pid\":0,\"tid\":0,"
         "\"args\":{\"name\":\"CLOCK_MONOTONIC\"}}\n],\n";
  out += "\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"clock\":"
         "\"CLOCK_MONOTONIC\",\"realtime_offset_ns\":" +
         std::to_string(t.realtime_offset_ns) +
         ",\"window_start_us\":" + micros(t.window_start_ns) +
         ",\"window_end_us\":" + micros(t.window_end_ns) +
         ",\"events_min_us\":" + micros(t.events_min_ns) +
         ",\"events_lost_ring\":" + std::to_string(t.lost_ring) +
         ",\"events_lost_ring_us\":" + micros(t.lost_ring_ns) +
         ",\"events_lost_memory\":" + std::to_string(t.lost_store) +
         ",\"events_lost_memory_us\":" + micros(t.lost_store_ns) + "}}\n";
  return flush(0);
}

std::string render_trace_json(const Timeline &t) {
  std::string all;
  write_trace_json(t, [&all](const std::string &piece) {
    all += piece;
    return true;
  });
  return all;
}

} // namespace offcpu
