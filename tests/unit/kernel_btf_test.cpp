// offcpu's reader of the kernel's BTF against libbpf's: on fixtures libbpf
// writes, on malformed bytes, and on this machine's vmlinux BTF.
#include <gtest/gtest.h>

#include <linux/btf.h>

#include <string>

#include "support/btf_bytes.h"

namespace offcpu {
namespace {

TEST(KernelBtf, ReadsWhatLibbpfWrites) {
  test::BtfPtr b(btf__new_empty());
  int u32 = btf__add_int(b.get(), "unsigned int", 4, 0);
  btf__add_struct(b.get(), "pair", 8);
  btf__add_field(b.get(), "lo", u32, 0, 0);
  btf__add_field(b.get(), "flag", u32, 35, 1);
  btf__add_enum(b.get(), "colour", 4);
  btf__add_enum_value(b.get(), "RED", 0);
  btf__add_enum_value(b.get(), "GREEN", 1);
  int proto = btf__add_func_proto(b.get(), u32);
  btf__add_func_param(b.get(), "data", u32);
  btf__add_func_param(b.get(), "x", u32);
  int ptr = btf__add_ptr(b.get(), proto);
  btf__add_typedef(b.get(), "btf_trace_demo", ptr);
  btf__add_func(b.get(), "demo_fn", BTF_FUNC_GLOBAL, proto);
  test::ParsedBtf parsed(b.get());
  const KernelBtf *k = parsed.get();
  ASSERT_NE(k, nullptr);

  int pair = k->find("pair", BTF_KIND_STRUCT);
  EXPECT_EQ(pair, btf__find_by_name_kind(b.get(), "pair", BTF_KIND_STRUCT));
  EXPECT_EQ(k->size_of(pair), 8u);
  auto m = k->members(pair);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "lo");
  EXPECT_EQ(m[0].bit_offset, 0u);
  EXPECT_EQ(m[0].bitfield_size, 0u);
  EXPECT_EQ(m[1].name, "flag");
  EXPECT_EQ(m[1].bit_offset, 35u);
  EXPECT_EQ(m[1].bitfield_size, 1u);
  EXPECT_TRUE(k->enum_has("colour", "GREEN"));
  EXPECT_FALSE(k->enum_has("colour", "BLUE"));
  EXPECT_FALSE(k->enum_has("pair", "lo")); // a struct, not an enum
  EXPECT_EQ(k->typedef_proto_params("btf_trace_demo"), 2);
  EXPECT_EQ(k->typedef_proto_params("pair"), -1);
  EXPECT_GE(k->find("demo_fn", BTF_KIND_FUNC), 1);
  EXPECT_EQ(k->find("demo_fn", BTF_KIND_STRUCT), -1);
  EXPECT_TRUE(k->members(-1).empty());
  EXPECT_TRUE(k->members(1000).empty());
}

TEST(KernelBtf, RefusesWhatIsNotBtf) {
  test::BtfPtr b(btf__new_empty());
  btf__add_int(b.get(), "int", 4, BTF_INT_SIGNED);
  __u32 size = 0;
  const auto *raw = static_cast<const uint8_t *>(btf__raw_data(b.get(), &size));
  std::vector<uint8_t> bytes(raw, raw + size);
  EXPECT_NE(KernelBtf::parse(bytes.data(), bytes.size()), nullptr);
  // Every truncation is refused or read within its bytes (ASan checks).
  for (size_t n = 0; n < bytes.size(); n++) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    auto k = KernelBtf::parse(cut.data(), cut.size());
    if (k)
      k->find("int", BTF_KIND_INT);
  }
  std::vector<uint8_t> bad = bytes;
  bad[0] ^= 0xff; // the magic
  EXPECT_EQ(KernelBtf::parse(bad.data(), bad.size()), nullptr);
  bad = bytes;
  bad[8] = 0xff; // type_off far past the end
  EXPECT_EQ(KernelBtf::parse(bad.data(), bad.size()), nullptr);
  EXPECT_EQ(KernelBtf::parse(nullptr, 0), nullptr);
}

// This machine's kernel: the same answers as libbpf for what the probe asks.
TEST(KernelBtf, AgreesWithLibbpfOnTheKernelsBtf) {
  auto k = KernelBtf::load_vmlinux();
  if (!k)
    GTEST_SKIP() << "no /sys/kernel/btf/vmlinux";
  test::BtfPtr b(btf__load_vmlinux_btf());
  ASSERT_TRUE(b);
  for (auto [name, kind] :
       {std::pair<const char *, unsigned>{"task_struct", BTF_KIND_STRUCT},
        {"bpf_func_id", BTF_KIND_ENUM},
        {"btf_trace_sched_switch", BTF_KIND_TYPEDEF},
        {"schedule", BTF_KIND_FUNC},
        {"bpf_iter__task", BTF_KIND_STRUCT}})
    EXPECT_EQ(k->find(name, kind), btf__find_by_name_kind(b.get(), name, kind))
        << name;
  int id = btf__find_by_name_kind(b.get(), "task_struct", BTF_KIND_STRUCT);
  const btf_type *t = btf__type_by_id(b.get(), id);
  auto members = k->members(id);
  ASSERT_EQ(members.size(), btf_vlen(t));
  for (unsigned i = 0; i < btf_vlen(t); i++) {
    EXPECT_EQ(members[i].name,
              btf__name_by_offset(b.get(), btf_members(t)[i].name_off));
    EXPECT_EQ(members[i].bit_offset, btf_member_bit_offset(t, i));
    EXPECT_EQ(members[i].bitfield_size, btf_member_bitfield_size(t, i));
  }
  EXPECT_EQ(k->size_of(id), t->size);
  EXPECT_TRUE(k->enum_has("bpf_func_id", "BPF_FUNC_get_stack"));
  EXPECT_EQ(k->typedef_proto_params("btf_trace_sched_switch"), 5);
}

} // namespace
} // namespace offcpu
