// The encoder against a small protobuf reader written here, field by field
// as profile.proto numbers them.
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>

#include "output/folded.h"
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
  uint32_t range = p.mapping({0x7f0000000000, 0x7f0000100000, 0x28000, libc});
  // Root first: main returns to 0x...1234, read (the leaf) is at 0x...5678.
  s.user.mut(0).address = 0x7f0000001234;
  s.user.mut(0).return_address = true;
  s.user.mut(1).address = 0x7f0000005678;
  for (size_t i = 0; i < s.user.size(); i++) {
    s.user.mut(i).module = libc;
    s.user.mut(i).mapping = range;
  }
  s.kernel.mut(0).address = 0xffffffff81234567;
  s.kernel.mut(0).return_address = true;
  s.kernel.mut(1).address = 0xffffffff81345678;
  for (size_t i = 0; i < s.kernel.size(); i++)
    s.kernel.mut(i).module = kernel;
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
  std::map<uint64_t, uint64_t> loc_fn, loc_addr, loc_mapping;
  for (const Field &l : locations) {
    auto lf = fields(l.bytes);
    uint64_t id = 0, fn = 0;
    for (const Field &x : lf) {
      if (x.number == 1)
        id = x.varint;
      if (x.number == 2)
        loc_mapping[id] = x.varint;
      if (x.number == 3)
        loc_addr[id] = x.varint;
      if (x.number == 4)
        fn = fields(x.bytes).at(0).varint;
    }
    loc_fn[id] = fn;
  }
  // Leaves at their address, callers at the call (the return address - 1).
  EXPECT_EQ(loc_addr[locs[0]], 0xffffffff81345678u);
  EXPECT_EQ(loc_addr[locs[1]], 0xffffffff81234566u);
  EXPECT_EQ(loc_addr[locs[2]], 0x7f0000005678u);
  EXPECT_EQ(loc_addr[locs[3]], 0x7f0000001233u);
  EXPECT_EQ(loc_addr.count(locs[4]), 0u) << "the thread has no address";
  std::map<uint64_t, std::string> fn_name;
  for (const Field &f : functions) {
    auto ff = fields(f.bytes);
    fn_name[ff.at(0).varint] = strings.at(ff.at(1).varint);
  }
  EXPECT_EQ(fn_name[loc_fn[locs[0]]], "schedule");
  EXPECT_EQ(fn_name[loc_fn[locs[3]]], "main");
  EXPECT_EQ(fn_name[loc_fn[locs[4]]], "worker");

  // The user range as the process mapped it; the kernel's around its
  // addresses, page aligned.
  std::map<uint64_t, std::map<int, uint64_t>> maps;
  for (const Field &m : mappings) {
    auto mf = fields(m.bytes);
    for (const Field &x : mf)
      maps[mf.at(0).varint][x.number] = x.varint;
  }
  ASSERT_EQ(maps.size(), 2u);
  auto &user = maps.at(loc_mapping[locs[3]]);
  EXPECT_EQ(user[2], 0x7f0000000000u);
  EXPECT_EQ(user[3], 0x7f0000100000u);
  EXPECT_EQ(user[4], 0x28000u);
  EXPECT_EQ(strings.at(user[5]), "/usr/lib/libc.so.6");
  EXPECT_EQ(strings.at(user[6]), "abcdef");
  EXPECT_EQ(user[7], 1u);
  EXPECT_EQ(loc_mapping[locs[2]], loc_mapping[locs[3]]);
  auto &kern = maps.at(loc_mapping[locs[0]]);
  EXPECT_EQ(kern[2], 0xffffffff81234000u);
  EXPECT_EQ(kern[3], 0xffffffff81346000u);
  EXPECT_EQ(strings.at(kern[5]), "[kernel.kallsyms]");
  EXPECT_EQ(mappings.size(), 2u);
}

// --no-symbolize: user code in files goes without names (no Line, and
// has_functions unset), for the reader to name from the file.
TEST(Pprof, UnsymbolizedUserFramesCarryAddressesOnly) {
  Profile p;
  p.user_symbolized = false;
  uint32_t exe = p.module("/opt/app", "feed");
  Sample s = test::sample("app", {"app+0x1234"}, {}, 5000, 11, 2);
  s.user.mut(0).module = exe;
  s.user.mut(0).address = 0x401234;
  s.user.mut(0).mapping = p.mapping({0x400000, 0x500000, 0, exe});
  p.samples = {s};
  bool line = false, has_functions = false, address = false;
  for (const Field &f : fields(encode_pprof(p))) {
    if (f.number == 3)
      for (const Field &x : fields(f.bytes))
        has_functions |= x.number == 7 && x.varint;
    if (f.number == 4) {
      auto lf = fields(f.bytes);
      bool addressed = false;
      for (const Field &x : lf)
        addressed |= x.number == 3 && x.varint == 0x401234;
      for (const Field &x : lf)
        line |= addressed && x.number == 4;
      address |= addressed;
    }
  }
  EXPECT_TRUE(address);
  EXPECT_FALSE(line);
  EXPECT_FALSE(has_functions);
}

// A Function's filename is its source file to pprof (-list prints it):
// the binary's path there made it print ELF bytes as source. Two modules'
// functions of one name stay two Functions.
TEST(Pprof, FunctionsNameNoBinaryAsTheirSourceFile) {
  Profile p;
  uint32_t app = p.module("/opt/app", "feed");
  uint32_t lib = p.module("/usr/lib/libx.so", "beef");
  Sample s = test::sample("app", {"main", "helper"}, {}, 5000, 11, 2);
  Sample t = test::sample("app", {"main", "helper"}, {}, 7000, 11, 2);
  s.user.mut(0).module = s.user.mut(1).module = app;
  t.user.mut(0).module = app;
  t.user.mut(1).module = lib;
  s.user.mut(0).address = t.user.mut(0).address = 0x401000;
  s.user.mut(1).address = 0x402000;
  t.user.mut(1).address = 0x7f0000001000;
  p.samples = {s, t};
  size_t functions = 0;
  for (const Field &f : fields(encode_pprof(p))) {
    if (f.number != 5)
      continue;
    functions++;
    for (const Field &x : fields(f.bytes))
      EXPECT_NE(x.number, 4) << "Function.filename set";
  }
  // main, helper in /opt/app, helper in libx; the thread frame "app".
  EXPECT_EQ(functions, 4u);
}

// Folded text made with -d keeps its "-" between user and kernel frames;
// pprof gets no "-" function (in every stack, it would top every view).
TEST(Pprof, DelimiterOfFoldedInputIsNoFunction) {
  Profile p = read_folded("t;main;read;-;ksys_read;schedule 5\n"
                          "t;main;poll;-;do_poll;schedule 7\n",
                          nullptr, "us");
  std::vector<std::string> table;
  for (const Field &f : fields(encode_pprof(p)))
    if (f.number == 6)
      table.push_back(f.bytes);
  size_t functions = 0;
  for (const Field &f : fields(encode_pprof(p))) {
    if (f.number != 5)
      continue;
    functions++;
    for (const Field &x : fields(f.bytes)) {
      if (x.number == 2) {
        EXPECT_NE(table.at(x.varint), "-");
      }
    }
  }
  // t, main, read, ksys_read, schedule, poll, do_poll.
  EXPECT_EQ(functions, 7u);
}

// The first mapping is pprof's "File:": the executable, not the library
// the first stack's leaf is in. --no-symbolize points a stripped file's
// mapping at its separate debug file (go tool pprof names code from DWARF
// in the named file only).
TEST(Pprof, ExecutableMapsFirstAndDebugFilesNameStrippedCode) {
  Profile p;
  p.user_symbolized = false;
  uint32_t libc = p.module("/usr/lib/x86_64-linux-gnu/libc.so.6", "93ac",
                           "/usr/lib/debug/.build-id/93/ac.debug");
  uint32_t exe = p.module("/usr/bin/redis-server", "feed");
  Sample s = test::sample("redis", {"redis-server+0x10", "libc.so.6+0x20"}, {},
                          5000, 11, 2);
  s.user.mut(0).module = exe;
  s.user.mut(0).address = 0x401010;
  s.user.mut(0).mapping = p.mapping({0x401000, 0x402000, 0x1000, exe});
  s.user.mut(1).module = libc;
  s.user.mut(1).address = 0x7f0000026020;
  s.user.mut(1).mapping =
      p.mapping({0x7f0000026000, 0x7f0000100000, 0x26000, libc});
  p.samples = {s};
  std::vector<std::string> table;
  std::vector<std::string> mappings;
  const std::string encoded = encode_pprof(p);
  for (const Field &f : fields(encoded))
    if (f.number == 6)
      table.push_back(f.bytes);
  for (const Field &f : fields(encoded))
    if (f.number == 3)
      for (const Field &x : fields(f.bytes))
        if (x.number == 5)
          mappings.push_back(table.at(x.varint));
  EXPECT_EQ(mappings,
            (std::vector<std::string>{"/usr/bin/redis-server",
                                      "/usr/lib/debug/.build-id/93/ac.debug"}));
  // Named here: the mapping keeps the file (its functions are written).
  p.user_symbolized = true;
  mappings.clear();
  table.clear();
  const std::string named = encode_pprof(p);
  for (const Field &f : fields(named))
    if (f.number == 6)
      table.push_back(f.bytes);
  for (const Field &f : fields(named))
    if (f.number == 3)
      for (const Field &x : fields(f.bytes))
        if (x.number == 5)
          mappings.push_back(table.at(x.varint));
  EXPECT_EQ(mappings.at(1), "/usr/lib/x86_64-linux-gnu/libc.so.6");
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
