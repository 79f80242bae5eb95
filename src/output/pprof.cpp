#include "output/pprof.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <tuple>

#include "model/layout.h"
#include "output/proto_writer.h"

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
enum Label { kKey = 1, kStr = 2, kNum = 3, kNumUnit = 4 };
enum Mapping {
  kMappingId = 1,
  kMemoryStart = 2,
  kMemoryLimit = 3,
  kFileOffset = 4,
  kFilename = 5,
  kBuildId = 6,
  kHasFunctions = 7,
};
enum Location { kLocId = 1, kLocMappingId = 2, kAddress = 3, kLine = 4 };
enum Line { kFunctionId = 1, kLineNumber = 2 };
enum Function {
  kFuncId = 1,
  kName = 2,
  kSystemName = 3,
  kFuncFilename = 4,
  kStartLine = 5
};
} // namespace field

// A pprof Mapping: a range of one process (or the kernel) and its file.
struct RangeSpec {
  uint64_t start = 0, limit = 0, file_offset = 0;
  const Module *module = nullptr;
  bool has_functions = true;
  // The file the reader is to name the range's code from, if not the
  // module's own (its separate debug file).
  const std::string *name_from = nullptr;
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

  // `key` tells ranges apart: a user range's index in the profile, or a
  // kernel module's (offset past every user range).
  uint64_t mapping(uint64_t key, const RangeSpec &r) {
    auto it = mappings_.find(key);
    if (it != mappings_.end())
      return it->second;
    uint64_t id = mappings_.size() + 1;
    mappings_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(field::kMappingId, id);
    w.uint_field(field::kMemoryStart, r.start);
    w.uint_field(field::kMemoryLimit, r.limit);
    w.uint_field(field::kFileOffset, r.file_offset);
    w.uint_field(field::kFilename,
                 str(r.name_from ? *r.name_from : r.module->path));
    w.uint_field(field::kBuildId, str(r.module->build_id));
    w.uint_field(field::kHasFunctions, r.has_functions ? 1 : 0);
    mapping_msgs_.push_back(w.data());
    return id;
  }

  // A location per (mapping, address, name); `named` false leaves the
  // naming to the reader (no Line).
  uint64_t location(uint64_t mapping_id, uint64_t address,
                    const std::string &name, const std::string &file,
                    bool named) {
    return location(mapping_id, address, &name, nullptr, 1, file, named);
  }

  // The same for the frames of one address, root first: the holder and
  // the functions inlined into it, one Line each, innermost first (pprof's
  // model of inlining). `frames` may be null for a frame without them.
  uint64_t location(uint64_t mapping_id, uint64_t address,
                    const std::string *name, const Frame *frames, size_t n,
                    const std::string &file, bool named) {
    std::string key_name;
    for (size_t i = 0; i < n; i++) {
      if (i)
        key_name += '\n';
      key_name += frames ? frames[i].name : *name;
    }
    auto key = std::make_tuple(mapping_id, address, key_name);
    auto it = locations_.find(key);
    if (it != locations_.end())
      return it->second;
    uint64_t id = locations_.size() + 1;
    locations_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(field::kLocId, id);
    w.uint_field(field::kLocMappingId, mapping_id);
    w.uint_field(field::kAddress, address);
    for (size_t i = n; named && i-- > 0;) {
      ProtoWriter line;
      const FrameSource *src = frames ? frames[i].source.get() : nullptr;
      if (src) {
        line.uint_field(field::kFunctionId, function(*src, file));
        line.uint_field(field::kLineNumber, src->line);
      } else {
        line.uint_field(field::kFunctionId,
                        function(frames ? frames[i].name : *name, file));
      }
      w.bytes_field(field::kLine, line.data());
    }
    location_msgs_.push_back(w.data());
    return id;
  }

  void sample(const std::vector<uint64_t> &locs, const Sample &s,
              const std::vector<uint64_t> &values) {
    ProtoWriter w;
    w.packed_field(field::kLocationId, locs);
    w.packed_field(field::kValue, values);
    auto label = [&](const std::string &key, const std::string *text,
                     uint64_t num, const char *unit = nullptr) {
      ProtoWriter l;
      l.uint_field(field::kKey, str(key));
      if (text)
        l.uint_field(field::kStr, str(*text));
      else
        l.uint_field(field::kNum, num);
      if (unit)
        l.uint_field(field::kNumUnit, str(unit));
      w.bytes_field(field::kLabel, l.data());
    };
    if (s.tgid || s.tid) { // folded input has no thread ids
      label("pid", nullptr, s.tgid);
      label("tid", nullptr, s.tid);
    }
    label("comm", &s.comm, 0);
    if (!s.cgroup.empty())
      label("cgroup", &s.cgroup, 0);
    if (s.waker && s.waker->kind == Waker::Kind::Task) {
      label("waker_comm", &s.waker->comm, 0);
      label("waker_tid", nullptr, s.waker->tid);
    } else if (s.waker) {
      const std::string kind = waker_marker(s.waker->kind);
      label("waker", &kind, 0);
    }
    if (s.lock) {
      const std::string side = s.lock->write ? "write" : "read";
      label("lock", &s.lock->lock, 0);
      if (s.lock->kind.empty())
        label("side", &side, 0);
      else
        label("kind", &s.lock->kind, 0);
      if (!s.lock->holder.empty())
        label("holder", &s.lock->holder, 0);
      // As the folded stack's "[owner COMM]" frame, which pprof has too.
      if (shows_lock_owner(s)) {
        label("owner_comm", &s.lock->owner_comm, 0);
        label("owner_tid", nullptr, s.lock->owner_tid);
      }
    }
    // The latency distribution: labels, not sample values, since pprof
    // sums values when it merges samples and a max or a quantile does not
    // add up. Numeric labels with a unit (`-tags`, `-raw`, `-tagfocus`),
    // and the histogram as text: each non-empty log2 bucket's lower bound
    // in microseconds and its waits.
    if (!s.latency.empty()) {
      label("wait_max", nullptr, s.latency.max_ns, "nanoseconds");
      label("wait_p50", nullptr, s.latency.quantile_ns(0.5), "nanoseconds");
      label("wait_p99", nullptr, s.latency.quantile_ns(0.99), "nanoseconds");
      std::string hist;
      for (size_t b = 0; b < Latency::kBuckets; b++)
        if (s.latency.bucket(b))
          hist += (hist.empty() ? "" : " ") +
                  std::to_string(Latency::low_ns(b) / 1000) +
                  "us:" + std::to_string(s.latency.bucket(b));
      label("wait_histogram", &hist, 0);
    }
    sample_msgs_.push_back(w.data());
  }

  // Sample types, then everything collected, then the string table.
  std::string
  finish(const Profile &profile,
         const std::vector<std::pair<std::string, std::string>> &sample_types) {
    ProtoWriter p;
    auto value_type = [&](const std::string &type, const std::string &unit) {
      ProtoWriter v;
      v.uint_field(field::kType, str(type));
      v.uint_field(field::kUnit, str(unit));
      return v.data();
    };
    for (const auto &[type, unit] : sample_types)
      p.bytes_field(field::kSampleType, value_type(type, unit));
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
    std::string period =
        value_type(sample_types.front().first, sample_types.front().second);
    uint64_t default_type = str(sample_types.back().first);
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
  // Functions of one name in two modules stay apart, but the module is not
  // their filename: pprof reads that as the source file (-list would print
  // the binary as text), and frames carry no source file.
  uint64_t function(const std::string &name, const std::string &module) {
    auto key = std::make_pair(name, module);
    auto it = functions_.find(key);
    if (it != functions_.end())
      return it->second;
    uint64_t id = functions_.size() + source_functions_.size() + 1;
    functions_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(field::kFuncId, id);
    w.uint_field(field::kName, str(name));
    w.uint_field(field::kSystemName, str(name));
    function_msgs_.push_back(w.data());
    return id;
  }

  std::map<std::string, uint64_t> strings_{{"", 0}};
  std::vector<std::string> table_{""};
  std::map<uint64_t, uint64_t> mappings_;
  std::map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> locations_;
  // A function named from DWARF: its source file (never the binary's
  // path) and first line.
  uint64_t function(const FrameSource &src, const std::string &module) {
    const std::string &file =
        src.function_file.empty() ? src.file : src.function_file;
    auto key = std::make_tuple(src.function, module, file, src.start_line);
    auto it = source_functions_.find(key);
    if (it != source_functions_.end())
      return it->second;
    uint64_t id = functions_.size() + source_functions_.size() + 1;
    source_functions_.emplace(key, id);
    ProtoWriter w;
    w.uint_field(field::kFuncId, id);
    w.uint_field(field::kName, str(src.function));
    w.uint_field(field::kSystemName, str(src.function));
    w.uint_field(field::kFuncFilename, str(file));
    w.uint_field(field::kStartLine, src.start_line);
    function_msgs_.push_back(w.data());
    return id;
  }

  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::map<std::tuple<std::string, std::string, std::string, uint32_t>,
           uint64_t>
      source_functions_;
  std::vector<std::string> mapping_msgs_, location_msgs_, function_msgs_,
      sample_msgs_;
};

constexpr uint64_t kPage = 4096;

// A shared library's path, as pprof's heuristic tells them from
// executables: the file name has ".so" at its end or before a version.
bool library_path(const std::string &path) {
  const std::string name = path.substr(path.rfind('/') + 1);
  for (size_t at = name.find(".so"); at != std::string::npos;
       at = name.find(".so", at + 1)) {
    const size_t after = at + 3;
    if (after == name.size() ||
        ((name[after] == '.' || name[after] == '_') &&
         after + 1 < name.size() &&
         std::isdigit(static_cast<unsigned char>(name[after + 1]))))
      return true;
  }
  return false;
}

// Where each frame goes in pprof's terms: its Mapping and address.
class Placer {
public:
  Placer(const Profile &p, ProfileBuilder &b) : p_(p), b_(b) {
    // The kernel's ranges: from the lowest to the highest address seen in
    // each kernel module ([kernel.kallsyms] and loaded modules).
    for (const Sample &s : p.samples)
      for (const Frame &f : s.kernel) {
        if (f.module >= p.modules.size())
          continue;
        auto [it, fresh] = kernel_.try_emplace(f.module, RangeSpec{});
        RangeSpec &r = it->second;
        uint64_t a = call_address(f);
        if (fresh || a < r.start)
          r.start = a;
        if (fresh || a >= r.limit)
          r.limit = a + 1;
      }
    for (auto &[module, r] : kernel_) {
      r.start &= ~(kPage - 1);
      r.limit = (r.limit + kPage - 1) & ~(kPage - 1);
      r.module = &p.modules[module];
    }
  }

  // pprof wants the address of the call: a return address less one.
  static uint64_t call_address(const Frame &f) {
    return f.return_address && f.address ? f.address - 1 : f.address;
  }

  uint64_t location(const Frame &f) { return location(&f, 1); }

  // One location for a frame and the `n - 1` frames inlined into it that
  // follow it (root first): one address.
  uint64_t location(const Frame *group, size_t n) {
    const Frame &f = group[0];
    const Module *module =
        f.module < p_.modules.size() ? &p_.modules[f.module] : nullptr;
    const std::string file = module ? module->path : std::string();
    uint64_t mapping_id = 0;
    bool named = true;
    if (f.kind == FrameKind::User && f.mapping < p_.mappings.size()) {
      const MappedRange &m = p_.mappings[f.mapping];
      // Only code in a file can be named later, from the file.
      named = p_.user_symbolized || file.empty() || file[0] != '/';
      // go tool pprof names code only from DWARF in the file a mapping
      // names: a stripped file's separate debug file has it (same build
      // id, same program headers; other readers take it as well).
      const Module &mod = p_.modules[m.module];
      const std::string *name_from =
          !named && !mod.debug_file.empty() ? &mod.debug_file : nullptr;
      mapping_id = b_.mapping(
          f.mapping, {m.start, m.limit, m.file_offset, &mod, named, name_from});
    } else if (f.kind == FrameKind::Kernel) {
      auto it = kernel_.find(f.module);
      if (it != kernel_.end())
        mapping_id = b_.mapping(p_.mappings.size() + f.module, it->second);
    } else if (f.kind != FrameKind::User && f.kind != FrameKind::Python) {
      // The thread, markers, the lock: no code, no address.
      return b_.location(0, 0, f.name, "", true);
    }
    return b_.location(mapping_id, call_address(f), &f.name, group, n, file,
                       named);
  }

private:
  const Profile &p_;
  ProfileBuilder &b_;
  std::map<uint32_t, RangeSpec> kernel_;
};

std::vector<std::pair<std::string, std::string>>
sample_types(const Profile &p) {
  switch (p.kind) {
  case ProfileKind::LockWaits:
    return {{"contentions", "count"}, {"delay", "nanoseconds"}};
  case ProfileKind::Folded:
    // Microseconds become off-CPU nanoseconds; other units are counts.
    if (p.folded_unit == "us")
      return {{"off_cpu", "nanoseconds"}};
    return {{p.folded_unit.empty() ? "samples" : p.folded_unit, "count"}};
  case ProfileKind::OffCpu:
    break;
  }
  // The last is the default view: off-CPU time, run-queue part or not.
  if (p.runqueue)
    return {{"events", "count"},
            {"runqueue", "nanoseconds"},
            {"off_cpu", "nanoseconds"}};
  return {{"events", "count"}, {"off_cpu", "nanoseconds"}};
}

std::vector<uint64_t> sample_values(const Profile &p, const Sample &s) {
  if (p.kind == ProfileKind::OffCpu && p.runqueue)
    return {s.count, std::min(s.runq_ns, s.total_ns), s.total_ns};
  if (p.kind != ProfileKind::Folded)
    return {s.count, s.total_ns};
  return {p.folded_unit == "us" ? s.total_ns : (s.total_ns + 500) / 1000};
}

// How many frames from `f` on make one location: itself and the inlined
// frames that follow it.
// (A waker's frames are laid out leaf first: each is a location of its own.)
template <typename It> size_t inlined_after(It f, It end) {
  size_t n = 1;
  while (f->kind == FrameKind::User && f + n < end && f[n].inlined &&
         f[n].kind == FrameKind::User)
    n++;
  return n;
}

} // namespace

std::string encode_pprof(const Profile &profile, const LayoutOptions &layout) {
  ProfileBuilder b;
  Placer place(profile, b);
  // pprof calls the first mapping the profile's main file ("File:"): an
  // executable's first, as pprof's own heuristic finds it (not a .so),
  // then the rest of the user code.
  std::vector<bool> library(profile.modules.size());
  for (size_t i = 0; i < library.size(); i++)
    library[i] = library_path(profile.modules[i].path);
  for (bool libraries : {false, true})
    for (const Sample &s : profile.samples)
      for (auto f = s.user.begin(); f != s.user.end(); ++f) {
        if (f->kind != FrameKind::User || f->inlined ||
            (f->module >= library.size() || library[f->module]) != libraries)
          continue;
        const size_t n = inlined_after(f, s.user.end());
        if (n == 1) {
          place.location(&*f, 1);
          continue;
        }
        // Its inlined calls follow it in a row, as location() reads them.
        const std::vector<Frame> group(f, f + static_cast<long>(n));
        place.location(group.data(), n);
      }
  for (const Sample &s : profile.samples) {
    // Locations leaf first, the thread as the root, as in the folded output;
    // no delimiter, not even one read from -d folded text: pprof's views
    // tell user from kernel code, and a "-" function in every stack would
    // top them at 100%.
    std::vector<Frame> frames = lay_out(s, LayoutOptions{false, layout.thread});
    std::vector<uint64_t> locs;
    const Frame *end = frames.data() + frames.size();
    for (size_t i = frames.size(); i-- > 0;) {
      const Frame &f = frames[i];
      if (f.kind == FrameKind::Delimiter ||
          (f.inlined && f.kind == FrameKind::User))
        continue; // an inlined frame is a Line of its holder's location
      locs.push_back(place.location(&f, inlined_after(&f, end)));
    }
    b.sample(locs, s, sample_values(profile, s));
  }
  return b.finish(profile, sample_types(profile));
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
