#include "output/perfetto.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "output/proto_writer.h"

namespace offcpu {
namespace {

// Field numbers, from perfetto_trace.proto (google/perfetto).
namespace pf {
enum Trace { kPacket = 1 };
enum Packet {
  kClockSnapshot = 6,
  kTimestamp = 8,
  kSequenceId = 10, // trusted_packet_sequence_id
  kTrackEvent = 11,
  kInternedData = 12,
  kSequenceFlags = 13,
  kTimestampClockId = 58,
  kTrackDescriptor = 60,
};
enum ClockSnapshot { kClocks = 1 };
enum Clock { kClockId = 1, kClockTimestamp = 2 };
enum BuiltinClock { kRealtime = 1, kMonotonic = 3 };
enum SequenceFlags { kStateCleared = 1, kNeedsState = 2 };
enum TrackDescriptor {
  kUuid = 1,
  kName = 2,
  kProcess = 3,
  kThread = 4,
  kParentUuid = 5
};
enum ProcessDescriptor { kProcPid = 1, kProcessName = 6 };
enum ThreadDescriptor { kThreadPid = 1, kThreadTid = 2, kThreadName = 5 };
enum TrackEvent {
  kDebugAnnotations = 4,
  kType = 9,
  kNameIid = 10,
  kTrackUuid = 11,
  kCategories = 22,
  kFlowIds = 47,
  kTerminatingFlowIds = 48,
  kCallstackIid = 56,
};
enum EventType { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3 };
enum InternedData {
  kEventNames = 2,
  kAnnotationNames = 3,
  kFunctionNames = 5,
  kFrames = 6,
  kCallstacks = 7,
  kAnnotationStrings = 29, // debug_annotation_string_values
};
enum Interned { kIid = 1, kInternedName = 2 }; // also InternedString's str
enum Frame { kFrameIid = 1, kFunctionNameId = 2, kFrameKind = 7 };
enum FrameKind { kNative = 1, kKernel = 2, kInterpreted = 3 };
enum Callstack { kCallstackIid_ = 1, kFrameIds = 2 };
enum DebugAnnotation {
  kAnnNameIid = 1,
  kUintValue = 3,
  kStringValue = 6,
  kStringValueIid = 17
};
} // namespace pf

constexpr uint32_t kSequence = 1;

// The debug annotations every wait has, and the lost events' counts,
// interned once.
const char *const kAnnotations[] = {"state",
                                    "stack",
                                    "waker",
                                    "waker_stack",
                                    "runqueue_ns",
                                    "chain",
                                    "events_lost_ring",
                                    "events_lost_ring_ns",
                                    "events_lost_memory",
                                    "events_lost_memory_ns"};
enum Annotation {
  kState = 1,
  kStack,
  kWaker,
  kWakerStack,
  kRunq,
  kChain,
  kLostRing,
  kLostRingNs,
  kLostMemory,
  kLostMemoryNs
};

// The track of offcpu's own notes (events it lost): no process's or
// thread's uuid (those are the pid or tid shifted by one).
constexpr uint64_t kOffcpuTrack = uint64_t{1} << 63;

std::string chain_text(const Timeline &t, const TimelineWait &w) {
  std::string out;
  for (const TimelineHop &h : w.chain) {
    if (!out.empty())
      out += " <- ";
    out += h.comm + "-" + std::to_string(h.tid) + " waited " +
           std::to_string(h.duration_ns / 1000) + " us in " +
           wait_name(t.stack(h.stack), h.comm) + " [" +
           std::string(1, h.state ? h.state : '?') + "], woken by " +
           waker_label(h.waker);
  }
  return out;
}

class TraceWriter {
public:
  TraceWriter(const Timeline &t, const TextSink &sink) : t_(t), sink_(sink) {}

  // A trace is a sequence of packets: written out a megabyte at a time,
  // so that the timeline, not its encoding too, is what is held.
  bool write() {
    clock_snapshot();
    tracks();
    uint64_t flow = 0;
    for (const TimelineWait &w : t_.waits) {
      wait(w, ++flow);
      if (!flush(kPiece))
        return false;
    }
    lost_events();
    return flush(0);
  }

private:
  ProtoWriter packet(uint64_t ts) {
    ProtoWriter p;
    p.varint_field(pf::kSequenceId, kSequence);
    if (ts) {
      p.varint_field(pf::kTimestamp, ts);
      p.varint_field(pf::kTimestampClockId, pf::kMonotonic);
    }
    return p;
  }
  void emit(const ProtoWriter &p) { out_.message_field(pf::kPacket, p); }

  static constexpr size_t kPiece = 1 << 20;
  bool flush(size_t least) {
    if (out_.data().size() < least)
      return true;
    bool ok = sink_(out_.data());
    out_.clear();
    return ok;
  }

  // Both clocks at one moment: what maps the trace's CLOCK_MONOTONIC
  // timestamps to wall-clock time.
  void clock_snapshot() {
    ProtoWriter snap;
    const uint64_t mono = t_.window_end_ns;
    for (auto [id, ts] : {std::pair<int, uint64_t>{
                              pf::kRealtime, mono + static_cast<uint64_t>(
                                                        t_.realtime_offset_ns)},
                          std::pair<int, uint64_t>{pf::kMonotonic, mono}}) {
      ProtoWriter c;
      c.varint_field(pf::kClockId, static_cast<uint64_t>(id));
      c.varint_field(pf::kClockTimestamp, ts);
      snap.message_field(pf::kClocks, c);
    }
    ProtoWriter p = packet(0);
    p.message_field(pf::kClockSnapshot, snap);
    // The interned annotation names, with the sequence's state cleared.
    ProtoWriter interned;
    for (size_t i = 0; i < std::size(kAnnotations); i++) {
      ProtoWriter n;
      n.varint_field(pf::kIid, i + 1);
      n.bytes_field(pf::kInternedName, kAnnotations[i]);
      interned.message_field(pf::kAnnotationNames, n);
    }
    p.message_field(pf::kInternedData, interned);
    p.varint_field(pf::kSequenceFlags, pf::kStateCleared);
    emit(p);
  }

  static uint64_t process_uuid(uint32_t tgid) { return uint64_t{tgid} << 1; }
  static uint64_t thread_uuid(uint32_t tid) { return (uint64_t{tid} << 1) | 1; }

  void tracks() {
    for (const auto &[tgid, name] : t_.processes) {
      ProtoWriter proc, track;
      proc.varint_field(pf::kProcPid, tgid);
      proc.bytes_field(pf::kProcessName, name);
      track.varint_field(pf::kUuid, process_uuid(tgid));
      track.message_field(pf::kProcess, proc);
      ProtoWriter p = packet(0);
      p.message_field(pf::kTrackDescriptor, track);
      emit(p);
    }
    // Each thread by its name at its last wait: a thread often names
    // itself after it started, and may have waited before.
    std::map<uint32_t, const TimelineWait *> last;
    for (const TimelineWait &w : t_.waits)
      last[w.tid] = &w;
    std::set<uint32_t> seen;
    for (const auto &[tid, w] : last) {
      seen.insert(tid);
      thread_track(w->tgid, tid, w->comm);
    }
    for (const TimelineWait &w : t_.waits)
      if (w.waker.kind == Waker::Kind::Task && seen.insert(w.waker.tid).second)
        thread_track(w.waker.tgid, w.waker.tid, w.waker.comm);
  }

  void thread_track(uint32_t tgid, uint32_t tid, const std::string &comm) {
    ProtoWriter thread, track;
    thread.varint_field(pf::kThreadPid, tgid);
    thread.varint_field(pf::kThreadTid, tid);
    thread.bytes_field(pf::kThreadName, comm);
    track.varint_field(pf::kUuid, thread_uuid(tid));
    track.varint_field(pf::kParentUuid, process_uuid(tgid));
    track.message_field(pf::kThread, thread);
    ProtoWriter p = packet(0);
    p.message_field(pf::kTrackDescriptor, track);
    emit(p);
  }

  // The iid of an event name, and the interned data that defines it when
  // it is new.
  uint64_t name_iid(const std::string &name, ProtoWriter &interned, bool &any) {
    auto [it, fresh] = names_.emplace(name, names_.size() + 1);
    if (fresh) {
      ProtoWriter n;
      n.varint_field(pf::kIid, it->second);
      n.bytes_field(pf::kInternedName, name);
      interned.message_field(pf::kEventNames, n);
      any = true;
    }
    return it->second;
  }

  // The iid of a string (function names, annotation values) in one of the
  // sequence's string tables, defined in `interned` when new.
  uint64_t string_iid(std::map<std::string, uint64_t> &table, int field,
                      const std::string &value, ProtoWriter &interned) {
    auto [it, fresh] = table.emplace(value, table.size() + 1);
    if (fresh) {
      ProtoWriter n;
      n.varint_field(pf::kIid, it->second);
      n.bytes_field(pf::kInternedName, value);
      interned.message_field(field, n);
    }
    return it->second;
  }

  uint64_t frame_iid(const Frame &f, ProtoWriter &interned) {
    const int kind = f.kind == FrameKind::Kernel   ? pf::kKernel
                     : f.kind == FrameKind::Python ? pf::kInterpreted
                                                   : pf::kNative;
    const std::string name = joined_frames({f});
    auto [it, fresh] =
        frames_.emplace(std::make_pair(name, kind), frames_.size() + 1);
    if (fresh) {
      ProtoWriter fr;
      fr.varint_field(pf::kFrameIid, it->second);
      fr.varint_field(
          pf::kFunctionNameId,
          string_iid(functions_, pf::kFunctionNames, name, interned));
      fr.varint_field(pf::kFrameKind, static_cast<uint64_t>(kind));
      interned.message_field(pf::kFrames, fr);
    }
    return it->second;
  }

  // A stack of the timeline as an interned callstack (root first, as
  // Perfetto's "bottom frame first"): its iid is the stack's index + 1.
  uint64_t callstack_iid(uint32_t stack, ProtoWriter &interned) {
    const TimelineStack &st = t_.stack(stack);
    if (st.user.empty() && st.kernel.empty())
      return 0;
    if (!callstacks_.insert(stack).second)
      return uint64_t{stack} + 1;
    std::vector<uint64_t> ids;
    for (const auto *frames : {&st.user, &st.kernel})
      for (const Frame &f : *frames)
        ids.push_back(frame_iid(f, interned));
    ProtoWriter cs;
    cs.varint_field(pf::kCallstackIid_, uint64_t{stack} + 1);
    cs.packed_field(pf::kFrameIds, ids);
    interned.message_field(pf::kCallstacks, cs);
    return uint64_t{stack} + 1;
  }

  // A stack as a debug annotation: its text interned once.
  void stack_annotation(ProtoWriter &ev, Annotation a, uint32_t stack,
                        ProtoWriter &interned) {
    ProtoWriter d;
    d.varint_field(pf::kAnnNameIid, a);
    auto [it, fresh] = stack_strings_.emplace(stack, stack_strings_.size() + 1);
    if (fresh) {
      ProtoWriter n;
      n.varint_field(pf::kIid, it->second);
      n.bytes_field(pf::kInternedName, joined_stack(t_.stack(stack)));
      interned.message_field(pf::kAnnotationStrings, n);
    }
    d.varint_field(pf::kStringValueIid, it->second);
    ev.message_field(pf::kDebugAnnotations, d);
  }

  static void string_annotation(ProtoWriter &ev, Annotation a,
                                const std::string &value) {
    ProtoWriter d;
    d.varint_field(pf::kAnnNameIid, a);
    d.bytes_field(pf::kStringValue, value);
    ev.message_field(pf::kDebugAnnotations, d);
  }

  // A slice's begin or an instant, with its name interned.
  ProtoWriter event_packet(uint64_t ts, int type, uint64_t track,
                           const std::string &name, ProtoWriter &ev,
                           ProtoWriter interned = {}) {
    bool fresh = !interned.data().empty();
    uint64_t iid = name_iid(name, interned, fresh);
    ev.varint_field(pf::kType, static_cast<uint64_t>(type));
    ev.varint_field(pf::kTrackUuid, track);
    ev.varint_field(pf::kNameIid, iid);
    ProtoWriter p = packet(ts);
    p.message_field(pf::kTrackEvent, ev);
    if (fresh)
      p.message_field(pf::kInternedData, interned);
    p.varint_field(pf::kSequenceFlags, pf::kNeedsState);
    return p;
  }

  void slice_end(uint64_t ts, uint32_t tid) {
    ProtoWriter ev;
    ev.varint_field(pf::kType, pf::kSliceEnd);
    ev.varint_field(pf::kTrackUuid, thread_uuid(tid));
    ProtoWriter p = packet(ts);
    p.message_field(pf::kTrackEvent, ev);
    p.varint_field(pf::kSequenceFlags, pf::kNeedsState);
    emit(p);
  }

  void wait(const TimelineWait &w, uint64_t flow) {
    ProtoWriter ev, interned;
    ev.bytes_field(pf::kCategories, "offcpu");
    string_annotation(ev, kState, std::string(1, w.state ? w.state : '?'));
    stack_annotation(ev, kStack, w.stack, interned);
    string_annotation(ev, kWaker, waker_label(w.waker));
    stack_annotation(ev, kWakerStack, w.waker.stack, interned);
    ProtoWriter runq;
    runq.varint_field(pf::kAnnNameIid, kRunq);
    runq.varint_field(pf::kUintValue, w.runq_ns);
    ev.message_field(pf::kDebugAnnotations, runq);
    if (!w.chain.empty())
      string_annotation(ev, kChain, chain_text(t_, w));
    if (uint64_t cs = callstack_iid(w.stack, interned))
      ev.varint_field(pf::kCallstackIid, cs);
    const uint64_t end = w.start_ns + w.duration_ns;
    emit(event_packet(w.start_ns, pf::kSliceBegin, thread_uuid(w.tid),
                      wait_name(t_.stack(w.stack), w.comm), ev,
                      std::move(interned)));
    if (w.waker.kind == Waker::Kind::Task)
      wakeup(w, flow, end);
    slice_end(end, w.tid);
  }

  // The waker's wakeup, an instant on its track, and the woken part of
  // the wait (from the wakeup to the switch-in, nested in its slice): the
  // flow joins the two.
  void wakeup(const TimelineWait &w, uint64_t flow, uint64_t end) {
    const uint64_t runq = std::min(w.runq_ns, w.duration_ns);
    const uint64_t woke =
        runq ? end - runq : end - std::min<uint64_t>(1000, w.duration_ns);
    ProtoWriter from;
    from.fixed64_field(pf::kFlowIds, flow);
    emit(event_packet(woke, pf::kInstant, thread_uuid(w.waker.tid),
                      "wakes " + w.comm + "-" + std::to_string(w.tid), from));
    ProtoWriter to;
    to.fixed64_field(pf::kTerminatingFlowIds, flow);
    emit(event_packet(woke, pf::kSliceBegin, thread_uuid(w.tid),
                      "woken by " + waker_label(w.waker), to));
    slice_end(end, w.tid);
  }

  static void uint_annotation(ProtoWriter &ev, Annotation a, uint64_t value) {
    ProtoWriter d;
    d.varint_field(pf::kAnnNameIid, a);
    d.varint_field(pf::kUintValue, value);
    ev.message_field(pf::kDebugAnnotations, d);
  }

  // Events dropped (a full ring buffer, or past --events-memory), as the
  // JSON's otherData says them: an instant at the window's end on a track
  // of offcpu's own, with the counts and their time as annotations. The
  // waits they were are still in the aggregated outputs.
  void lost_events() {
    if (!t_.lost_ring && !t_.lost_store)
      return;
    ProtoWriter track;
    track.varint_field(pf::kUuid, kOffcpuTrack);
    track.bytes_field(pf::kName, "offcpu: events lost");
    ProtoWriter p = packet(0);
    p.message_field(pf::kTrackDescriptor, track);
    emit(p);
    ProtoWriter ev;
    ev.bytes_field(pf::kCategories, "offcpu");
    uint_annotation(ev, kLostRing, t_.lost_ring);
    uint_annotation(ev, kLostRingNs, t_.lost_ring_ns);
    uint_annotation(ev, kLostMemory, t_.lost_store);
    uint_annotation(ev, kLostMemoryNs, t_.lost_store_ns);
    emit(event_packet(t_.window_end_ns, pf::kInstant, kOffcpuTrack,
                      "events lost", ev));
  }

  const Timeline &t_;
  const TextSink &sink_;
  ProtoWriter out_;
  std::map<std::string, uint64_t> names_;
  // Interned so far, by what they intern: function names, frames (name,
  // kind), callstacks and stack texts by the timeline's stack index.
  std::map<std::string, uint64_t> functions_;
  std::map<std::pair<std::string, int>, uint64_t> frames_;
  std::set<uint32_t> callstacks_;
  std::map<uint32_t, uint64_t> stack_strings_;
};

} // namespace

bool write_perfetto(const Timeline &t, const TextSink &sink) {
  return TraceWriter(t, sink).write();
}

std::string render_perfetto(const Timeline &t) {
  std::string all;
  write_perfetto(t, [&all](const std::string &piece) {
    all += piece;
    return true;
  });
  return all;
}

} // namespace offcpu
