#include "output/pprof.h"

#include <zlib.h>

#include <map>
#include <stdexcept>
#include <tuple>

#include "model/layout.h"

namespace offcpu {
namespace {

// Field numbers of profile.proto (github.com/google/pprof, proto/).
namespace field {
enum Profile {
  kSampleType = 1,
  kSample = 2,
  kMapping = 3,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kTimeNanos = 9,
  kDurationNanos = 10,
  kPeriodType = 11,
  kPeriod = 12,
  kComment = 13,
  kDefaultSampleType = 14,
};
enum ValueType { kType = 1, kUnit = 2 };
enum Sample { kLocationId = 1, kValue = 2, kLabel = 3 };
enum Label { kKey = 1, kStr = 2, kNum = 3 };
enum Mapping {
  kMappingId = 1,
  kFilename = 5,
  kBuildId = 6,
  kHasFunctions = 7,
};
enum Location { kLocId = 1, kLocMappingId = 2, kLine = 4 };
enum Line { kFunctionId = 1 };
enum Function { kFuncId = 1, kName = 2, kSystemName = 3, kFuncFilename = 4 };
} // namespace field

// Protobuf wire format: varints and length-delimited fields are all we need.
class ProtoWriter {
public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    buf_ += static_cast<char>(v);
  }
  void tag(int field, int wire_type) {
    varint(static_cast<uint64_t>(field) << 3 |
           static_cast<uint64_t>(wire_type));
  }
  void uint_field(int field, uint64_t v) {
    if (v == 0)
      return; // proto3 default
    tag(field, 0);
    varint(v);
  }
  void bytes_field(int field, const std::string &bytes) {
    tag(field, 2);
    varint(bytes.size());
    buf_ += bytes;
  }
  void packed_field(int field, const std::vector<uint64_t> &values) {
    if (values.empty())
      return;
    ProtoWriter inner;
    for (uint64_t v : values)
      inner.varint(v);
    bytes_field(field, inner.buf_);
  }
  const std::string &data() const { return buf_; }

private:
  std::string buf_;
};

// Modules that are not the profile's: where markers and threads "live".
const Module kMissed{"[missed]", ""};
const Module kThread{"[thread]", ""};
const Module kLock{"[lock]", ""};

class ProfileBuilder {
public:
  uint64_t str(const std::string &s) {
    auto it = strings_.find(s);
    if (it != strings_.end())
      return it->second;
    uint64_t id = table_.size();
    strings_.emplace(s, id);
    table_.push_back(s);
    return id;
  }

  uint64_t mapping(const Module *m) {
    if (!m)
      return 0;
    auto it = mappings_.find(m);
    if (it != mappings_.end())
      return it->second;
    uint64_t id = mappings_.size() + 1;
    mappings_.emplace(m, id);
    ProtoWriter w;
    w.uint_field(field::kMappingId, id);
    w.uint_field(field::kFilename, str(m->path));
    w.uint_field(field::kBuildId, str(m->build_id));
    w.uint_field(field::kHasFunctions, 1);
    mapping_msgs_.push_back(w.data());
    return id;
  }

  uint64_t location(const std::string &name, const Module *m) {
    uint64_t mapping_id = mapping(m);
    auto key = std::make_pair(name, mapping_id);
    auto it = locations_.find(key);
    if (it != locations_.end())
      return it->second;
    uint64_t fn_id = function(name, m);
    uint64_t id = locations_.size() + 1;
    locations_.emplace(key, id);
    ProtoWriter line;
    line.uint_field(field::kFunctionId, fn_id);
    ProtoWriter w;
    w.uint_field(field::kLocId, id);
    w.uint_field(field::kLocMappingId, mapping_id);
    w.bytes_field(field::kLine, line.data());
    location_msgs_.push_back(w.data());
    return id;
  }

  void sample(const std::vector<uint64_t> &locs, const Sample &s) {
    ProtoWriter w;
    w.packed_field(field::kLocationId, locs);
    w.packed_field(field::kValue, {s.count, s.total_ns});
    auto label = [&](const std::string &key, const std::string *text,
                     uint64_t num) {
      ProtoWriter l;
      l.uint_field(field::kKey, str(key));
      if (text)
        l.uint_field(field::kStr, str(*text));
      else
        l.uint_field(field::kNum, num);
      w.bytes_field(field::kLabel, l.data());
    };
    label("pid", nullptr, s.tgid);
    label("tid", nullptr, s.tid);
    label("comm", &s.comm, 0);
    if (s.lock) {
      const std::string side = s.lock->write ? "write" : "read";
      label("lock", &s.lock->lock, 0);
      label("side", &side, 0);
    }
    sample_msgs_.push_back(w.data());
  }

  std::string finish(const Profile &profile) {
    const bool locks = profile.kind == ProfileKind::LockWaits;
    const std::string count_type = locks ? "contentions" : "events";
    const std::string time_type = locks ? "delay" : "off_cpu";
    ProtoWriter p;
    auto value_type = [&](const std::string &type, const std::string &unit) {
      ProtoWriter v;
      v.uint_field(field::kType, str(type));
      v.uint_field(field::kUnit, str(unit));
      return v.data();
    };
    p.bytes_field(field::kSampleType, value_type(count_type, "count"));
    p.bytes_field(field::kSampleType, value_type(time_type, "nanoseconds"));
    for (const auto &m : sample_msgs_)
      p.bytes_field(field::kSample, m);
    for (const auto &m : mapping_msgs_)
      p.bytes_field(field::kMapping, m);
    for (const auto &m : location_msgs_)
      p.bytes_field(field::kLocation, m);
    for (const auto &m : function_msgs_)
      p.bytes_field(field::kFunction, m);
    // Every string must be interned before the table is written.
    uint64_t comment = profile.comment.empty() ? 0 : str(profile.comment);
    std::string period = value_type(count_type, "count");
    uint64_t default_type = str(time_type);
    for (const std::string &s : table_)
      p.bytes_field(field::kStringTable, s);
    p.uint_field(field::kTimeNanos, static_cast<uint64_t>(profile.time_nanos));
    p.uint_field(field::kDurationNanos,
                 static_cast<uint64_t>(profile.duration_nanos));
    p.bytes_field(field::kPeriodType, period);
    p.uint_field(field::kPeriod, 1);
    if (comment) {
      p.tag(field::kComment, 0);
      p.varint(comment);
    }
    p.uint_field(field::kDefaultSampleType, default_type);
    return p.data();
  }

private:
  uint64_t function(const std::string &name, const Module *m) {
    auto key = std::make_pair(name, m ? m->path : std::string());
    auto it = functions_.find(key);
    if (it != functions_.end())
      return it->second;
    uint64_t id = functions_.size() + 1;
    functions_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(field::kFuncId, id);
    w.uint_field(field::kName, str(name));
    w.uint_field(field::kSystemName, str(name));
    w.uint_field(field::kFuncFilename, str(m ? m->path : std::string()));
    function_msgs_.push_back(w.data());
    return id;
  }

  std::map<std::string, uint64_t> strings_{{"", 0}};
  std::vector<std::string> table_{""};
  std::map<const Module *, uint64_t> mappings_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> locations_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::vector<std::string> mapping_msgs_, location_msgs_, function_msgs_,
      sample_msgs_;
};

const Module *module_of(const Profile &p, const Frame &f) {
  switch (f.kind) {
  case FrameKind::Thread:
    return &kThread;
  case FrameKind::Lock:
    return &kLock;
  case FrameKind::Marker:
  case FrameKind::Delimiter:
    return &kMissed;
  default:
    return f.module < p.modules.size() ? &p.modules[f.module] : nullptr;
  }
}

} // namespace

std::string encode_pprof(const Profile &profile, const LayoutOptions &layout) {
  ProfileBuilder b;
  // pprof calls the first mapping the profile's main file: user code first.
  for (const Sample &s : profile.samples)
    for (const Frame &f : s.user)
      b.mapping(module_of(profile, f));
  for (const Sample &s : profile.samples) {
    // Locations leaf first, the thread as the root, as in the folded output.
    // No delimiter: pprof's own views tell user from kernel code.
    std::vector<Frame> frames = lay_out(s, LayoutOptions{false, layout.thread});
    std::vector<uint64_t> locs;
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
      locs.push_back(b.location(it->name, module_of(profile, *it)));
    b.sample(locs, s);
  }
  return b.finish(profile);
}

std::string gzip_compress(const std::string &data) {
  z_stream zs{};
  // windowBits 15 + 16: gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef *>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END)
    throw std::runtime_error("zlib: deflate failed");
  out.resize(zs.total_out);
  return out;
}

} // namespace offcpu
