#include "output/pprof.h"

#include <zlib.h>

#include <map>
#include <stdexcept>
#include <tuple>

namespace offcpu {
namespace {

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

  uint64_t mapping(const ModuleInfo *m) {
    if (!m)
      return 0;
    auto it = mappings_.find(m);
    if (it != mappings_.end())
      return it->second;
    uint64_t id = mappings_.size() + 1;
    mappings_.emplace(m, id);
    ProtoWriter w;
    w.uint_field(1, id);
    w.uint_field(5, str(m->path));
    w.uint_field(6, str(m->build_id));
    w.uint_field(7, 1); // has_functions
    mapping_msgs_.push_back(w.data());
    return id;
  }

  uint64_t location(const std::string &name, const ModuleInfo *m) {
    uint64_t mapping_id = mapping(m);
    auto key = std::make_pair(name, mapping_id);
    auto it = locations_.find(key);
    if (it != locations_.end())
      return it->second;
    uint64_t fn_id = function(name, m);
    uint64_t id = locations_.size() + 1;
    locations_.emplace(key, id);
    ProtoWriter line;
    line.uint_field(1, fn_id);
    ProtoWriter w;
    w.uint_field(1, id);
    w.uint_field(2, mapping_id);
    w.bytes_field(4, line.data());
    location_msgs_.push_back(w.data());
    return id;
  }

  void sample(const std::vector<uint64_t> &locs, uint64_t count, uint64_t ns,
              const Sample &s) {
    ProtoWriter w;
    w.packed_field(1, locs);
    w.packed_field(2, {count, ns});
    auto label = [&](const std::string &key, const std::string *text,
                     uint64_t num) {
      ProtoWriter l;
      l.uint_field(1, str(key));
      if (text)
        l.uint_field(2, str(*text));
      else
        l.uint_field(3, num);
      w.bytes_field(3, l.data());
    };
    label("pid", nullptr, s.tgid);
    label("tid", nullptr, s.pid);
    label("comm", &s.comm, 0);
    sample_msgs_.push_back(w.data());
  }

  std::string finish(const PprofOptions &o) {
    ProtoWriter p;
    auto value_type = [&](const std::string &type, const std::string &unit) {
      ProtoWriter v;
      v.uint_field(1, str(type));
      v.uint_field(2, str(unit));
      return v.data();
    };
    p.bytes_field(1, value_type(o.count_type, "count"));
    p.bytes_field(1, value_type(o.time_type, "nanoseconds"));
    for (const auto &m : sample_msgs_)
      p.bytes_field(2, m);
    for (const auto &m : mapping_msgs_)
      p.bytes_field(3, m);
    for (const auto &m : location_msgs_)
      p.bytes_field(4, m);
    for (const auto &m : function_msgs_)
      p.bytes_field(5, m);
    // Every string must be interned before the table is written.
    uint64_t comment = o.comment.empty() ? 0 : str(o.comment);
    std::string period = value_type(o.count_type, "count");
    uint64_t default_type = str(o.time_type);
    for (const std::string &s : table_)
      p.bytes_field(6, s);
    p.uint_field(9, static_cast<uint64_t>(o.time_nanos));
    p.uint_field(10, static_cast<uint64_t>(o.duration_nanos));
    p.bytes_field(11, period);
    p.uint_field(12, 1);
    if (comment) {
      p.tag(13, 0);
      p.varint(comment);
    }
    p.uint_field(14, default_type);
    return p.data();
  }

private:
  uint64_t function(const std::string &name, const ModuleInfo *m) {
    auto key = std::make_pair(name, m ? m->path : std::string());
    auto it = functions_.find(key);
    if (it != functions_.end())
      return it->second;
    uint64_t id = functions_.size() + 1;
    functions_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(1, id);
    w.uint_field(2, str(name));
    w.uint_field(3, str(name));
    w.uint_field(4, str(m ? m->path : std::string()));
    function_msgs_.push_back(w.data());
    return id;
  }

  std::map<std::string, uint64_t> strings_{{"", 0}};
  std::vector<std::string> table_{""};
  std::map<const ModuleInfo *, uint64_t> mappings_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> locations_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::vector<std::string> mapping_msgs_, location_msgs_, function_msgs_,
      sample_msgs_;
};

const ModuleInfo *module_at(const std::vector<const ModuleInfo *> &mods,
                            size_t i) {
  return i < mods.size() ? mods[i] : nullptr;
}

} // namespace

std::string encode_pprof(const std::vector<Sample> &samples,
                         const PprofOptions &opts) {
  ProfileBuilder b;
  // pprof calls the first mapping the profile's main file: user code first.
  for (const Sample &s : samples)
    for (const ModuleInfo *m : s.user_modules)
      b.mapping(m);
  static const ModuleInfo kMissed{"[missed]", ""};
  for (const Sample &s : samples) {
    // Locations leaf first: kernel leaf to root, then user leaf to root.
    std::vector<uint64_t> locs;
    for (size_t i = s.kernel.size(); i-- > 0;)
      locs.push_back(b.location(s.kernel[i], module_at(s.kernel_modules, i)));
    if (s.kernel_missed)
      locs.push_back(b.location("[Missed Kernel Stack]", &kMissed));
    for (size_t i = s.user.size(); i-- > 0;)
      locs.push_back(b.location(s.user[i], module_at(s.user_modules, i)));
    if (s.user_missed)
      locs.push_back(b.location("[Missed User Stack]", &kMissed));
    // The comm as the root frame, as in the folded output.
    static const ModuleInfo kThread{"[thread]", ""};
    locs.push_back(b.location(s.comm, &kThread));
    b.sample(locs, s.count, s.total_ns, s);
  }
  return b.finish(opts);
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
