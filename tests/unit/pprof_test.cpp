// The encoder against a small protobuf reader written here, field by field
// as profile.proto numbers them.
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>

#include "output/pprof.h"
#include "support/model_builder.h"

namespace offcpu {
namespace {

struct Field {
  int number = 0;
  uint64_t varint = 0;
  std::string bytes;
};

std::vector<Field> fields(const std::string &msg) {
  std::vector<Field> out;
  size_t p = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; p < msg.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(msg[p++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        break;
    }
    return v;
  };
  while (p < msg.size()) {
    uint64_t key = varint();
    Field f;
    f.number = static_cast<int>(key >> 3);
    if ((key & 7) == 0) {
      f.varint = varint();
    } else {
      EXPECT_EQ(key & 7, 2u);
      uint64_t len = varint();
      f.bytes = msg.substr(p, len);
      p += len;
    }
    out.push_back(f);
  }
  return out;
}

std::vector<uint64_t> packed(const std::string &bytes) {
  std::vector<uint64_t> v;
  size_t p = 0;
  while (p < bytes.size()) {
    uint64_t x = 0;
    for (int shift = 0; p < bytes.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(bytes[p++]);
      x |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        break;
    }
    v.push_back(x);
  }
  return v;
}

TEST(Pprof, ProfileHasTypesSamplesLabelsAndStrings) {
  Profile p;
  uint32_t libc = p.module("/usr/lib/libc.so.6", "abcdef");
  uint32_t kernel = p.module("[kernel.kallsyms]", "");
  Sample s = test::sample("worker", {"main", "read"}, {"ksys_read", "schedule"},
                          5000, 11, 2);
  s.tgid = 10;
  for (Frame &f : s.user)
    f.module = libc;
  for (Frame &f : s.kernel)
    f.module = kernel;
  p.samples = {s};
  p.time_nanos = 1700000000000000000;
  p.duration_nanos = 3000000000;
  std::string msg = encode_pprof(p);

  std::vector<std::string> strings;
  std::vector<Field> samples, types, mappings, locations, functions;
  uint64_t default_type = 0, duration = 0;
  for (const Field &f : fields(msg)) {
    switch (f.number) {
    case 1:
      types.push_back(f);
      break;
    case 2:
      samples.push_back(f);
      break;
    case 3:
      mappings.push_back(f);
      break;
    case 4:
      locations.push_back(f);
      break;
    case 5:
      functions.push_back(f);
      break;
    case 6:
      strings.push_back(f.bytes);
      break;
    case 10:
      duration = f.varint;
      break;
    case 14:
      default_type = f.varint;
      break;
    }
  }
  ASSERT_FALSE(strings.empty());
  EXPECT_EQ(strings[0], "");
  ASSERT_EQ(types.size(), 2u);
  auto type_name = [&](const Field &t) {
    return strings.at(fields(t.bytes).at(0).varint);
  };
  EXPECT_EQ(type_name(types[0]), "events");
  EXPECT_EQ(type_name(types[1]), "off_cpu");
  EXPECT_EQ(strings.at(default_type), "off_cpu");
  EXPECT_EQ(duration, 3000000000u);

  ASSERT_EQ(samples.size(), 1u);
  std::vector<uint64_t> locs, values;
  std::map<std::string, std::string> labels;
  for (const Field &f : fields(samples[0].bytes)) {
    if (f.number == 1)
      locs = packed(f.bytes);
    if (f.number == 2)
      values = packed(f.bytes);
    if (f.number == 3) {
      auto l = fields(f.bytes);
      std::string key = strings.at(l.at(0).varint);
      labels[key] = l.at(1).number == 2 ? strings.at(l[1].varint)
                                        : std::to_string(l[1].varint);
    }
  }
  EXPECT_EQ(values, (std::vector<uint64_t>{2, 5000}));
  EXPECT_EQ(locs.size(), 5u); // 2 kernel + 2 user + the comm, leaf first
  EXPECT_EQ(labels["pid"], "10");
  EXPECT_EQ(labels["tid"], "11");
  EXPECT_EQ(labels["comm"], "worker");

  // Leaf first: the first location's function is "schedule".
  std::map<uint64_t, uint64_t> loc_fn;
  for (const Field &l : locations) {
    auto lf = fields(l.bytes);
    uint64_t id = 0, fn = 0;
    for (const Field &x : lf) {
      if (x.number == 1)
        id = x.varint;
      if (x.number == 4)
        fn = fields(x.bytes).at(0).varint;
    }
    loc_fn[id] = fn;
  }
  std::map<uint64_t, std::string> fn_name;
  for (const Field &f : functions) {
    auto ff = fields(f.bytes);
    fn_name[ff.at(0).varint] = strings.at(ff.at(1).varint);
  }
  EXPECT_EQ(fn_name[loc_fn[locs[0]]], "schedule");
  EXPECT_EQ(fn_name[loc_fn[locs[3]]], "main");
  EXPECT_EQ(fn_name[loc_fn[locs[4]]], "worker");

  bool build_id = false;
  for (const Field &m : mappings)
    for (const Field &x : fields(m.bytes))
      build_id |= x.number == 6 && strings.at(x.varint) == "abcdef";
  EXPECT_TRUE(build_id);
}

TEST(Pprof, GzipRoundTrips) {
  std::string data(100000, 'x');
  std::string gz = gzip_compress(data);
  ASSERT_GT(gz.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(gz[1]), 0x8b);
  z_stream zs{};
  ASSERT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  std::string out(data.size() + 10, '\0');
  zs.next_in = reinterpret_cast<Bytef *>(gz.data());
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef *>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  EXPECT_EQ(out, data);
}

} // namespace
} // namespace offcpu
