// The reading of libbpf's generated loader (collect/loader_shape.h) on
// loaders built here the way libbpf 1.1's gen_loader writes them, and on
// loaders of other shapes, which must be told apart (the split load then
// loads by libbpf). The real loader's shape is the integration tests' (the
// split load through generated loaders, Profile.SplitLoad...).
#include "collect/loader_shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace offcpu {
namespace {

constexpr int32_t kCleanup = -1000; // a jump back to the clean-up code

// Emits instruction sequences as gen_loader does.
struct Loader {
  std::vector<bpf_insn> insns;

  void add(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    insns.push_back(bpf_insn{code, dst, src, off, imm});
  }
  void data_address(uint8_t reg, int32_t off) {
    add(BPF_LD | BPF_DW | BPF_IMM, reg, BPF_PSEUDO_MAP_IDX_VALUE, 0, 0);
    add(0, 0, 0, 0, off);
  }
  void sys_bpf(int32_t cmd, int32_t attr, int32_t size) {
    add(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, cmd);
    data_address(BPF_REG_2, attr);
    add(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, size);
    add(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sys_bpf);
    add(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_7, BPF_REG_0, 0, 0);
  }
  void check_err() {
    add(BPF_JMP | BPF_JSLT | BPF_K, BPF_REG_7, 0, kCleanup, 0);
  }
  // The slot's descriptor into the attr's map_fd (its first word).
  void move_slot(int32_t slot, int32_t attr) {
    data_address(BPF_REG_2, slot);
    add(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_2, 0, 0);
    data_address(BPF_REG_1, attr);
    add(BPF_STX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_0, 0, 0);
  }
  void rel_store(int32_t field, int32_t data) {
    data_address(BPF_REG_0, data);
    data_address(BPF_REG_1, field);
    add(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0);
  }

  size_t create(int32_t attr, int32_t slot) {
    sys_bpf(BPF_MAP_CREATE, attr, 72);
    const size_t call = insns.size() - 2;
    check_err();
    data_address(BPF_REG_1, slot);
    add(BPF_STX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_7, 0, 0);
    return call;
  }
  size_t update(int32_t slot, int32_t attr) {
    // The initial value copied from the context's pointer, if any.
    add(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_3, BPF_REG_6, 40, 0);
    add(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_3, 0, 8, 0);
    data_address(BPF_REG_1, 4096);
    add(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, 64);
    add(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_6, 4, 0);
    add(BPF_JMP | BPF_JSET | BPF_K, BPF_REG_0, 0, 2, 1);
    add(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_copy_from_user);
    add(BPF_JMP | BPF_JA, 0, 0, 1, 0);
    add(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_probe_read_kernel);
    move_slot(slot, attr);
    rel_store(attr + 8, 5000);
    rel_store(attr + 16, 4096);
    sys_bpf(BPF_MAP_UPDATE_ELEM, attr, 32);
    check_err();
    return insns.size() - 3;
  }
  size_t freeze(int32_t slot, int32_t attr) {
    move_slot(slot, attr);
    sys_bpf(BPF_MAP_FREEZE, attr, 4);
    check_err();
    return insns.size() - 3;
  }
  // What the rewrite does to a create (the given descriptor read from the
  // attr) and to the .bss update (r0 = 0).
  void take_map(size_t call) {
    insns[call] =
        bpf_insn{BPF_LDX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_2, 0, 0};
  }
  void skip_call(size_t call) {
    insns[call] = bpf_insn{BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0};
  }
};

// An object's loader: BTF, maps 0-1 (hash maps), 2 (.rodata: written and
// frozen), 3 (.bss: written), then a program.
struct ObjectLoader : Loader {
  std::vector<size_t> creates;
  size_t bss_update = 0;
  ObjectLoader() {
    sys_bpf(BPF_BTF_LOAD, 2000, 40);
    check_err();
    creates.push_back(create(2100, 0));
    creates.push_back(create(2200, 4));
    creates.push_back(create(2300, 8));
    update(8, 2400);
    freeze(8, 2500);
    creates.push_back(create(2600, 12));
    bss_update = update(12, 2700);
    sys_bpf(BPF_PROG_LOAD, 2800, 144);
    check_err();
  }
  void rewrite() {
    for (size_t c : creates)
      take_map(c);
    skip_call(bss_update);
  }
};

const std::vector<bool> kOwn = {false, false, true, false};

TEST(LoaderShape, FindsEachCreateWithItsAttrAndSlot) {
  ObjectLoader l;
  auto found = find_creates(l.insns);
  ASSERT_EQ(found.size(), 4u);
  const uint32_t attrs[] = {2100, 2200, 2300, 2600};
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].call, l.creates[i]) << i;
    EXPECT_EQ(found[i].attr, attrs[i]) << i;
    EXPECT_EQ(found[i].slot, static_cast<int32_t>(i * 4)) << i;
  }
}

TEST(LoaderShape, FindsTheDataMapsUpdateOnlyWhereThereIsOne) {
  ObjectLoader l;
  EXPECT_EQ(find_update(l.insns, 12), l.bss_update);
  EXPECT_NE(find_update(l.insns, 8), 0u); // .rodata's
  EXPECT_EQ(find_update(l.insns, 0), 0u); // a hash map: none
  l.update(12, 2900);                     // a second one: not this shape
  EXPECT_EQ(find_update(l.insns, 12), 0u);
}

TEST(LoaderShape, TheRewrittenLoaderMakesOnlyTheAllowedCalls) {
  ObjectLoader l;
  EXPECT_FALSE(only_allowed_calls(l.insns, kOwn, SIZE_MAX)); // creates
  l.rewrite();
  EXPECT_TRUE(only_allowed_calls(l.insns, kOwn, SIZE_MAX));
}

TEST(LoaderShape, AWriteToAGivenMapIsRefused) {
  ObjectLoader l;
  l.rewrite();
  l.update(4, 3000); // map 1 is the light object's, live
  EXPECT_FALSE(only_allowed_calls(l.insns, kOwn, SIZE_MAX));
  ObjectLoader f;
  f.rewrite();
  f.freeze(12, 3000); // nor frozen
  EXPECT_FALSE(only_allowed_calls(f.insns, kOwn, SIZE_MAX));
  ObjectLoader b;
  for (size_t c : b.creates)
    b.take_map(c); // the .bss write left as it was
  EXPECT_FALSE(only_allowed_calls(b.insns, kOwn, SIZE_MAX));
}

TEST(LoaderShape, OnlyTheFailingMapMayBeCreated) {
  ObjectLoader l;
  l.rewrite();
  l.insns[l.creates[1]] =
      bpf_insn{BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sys_bpf};
  EXPECT_FALSE(only_allowed_calls(l.insns, kOwn, SIZE_MAX));
  EXPECT_TRUE(only_allowed_calls(l.insns, kOwn, l.creates[1]));
  EXPECT_FALSE(only_allowed_calls(l.insns, kOwn, l.creates[0]));
}

TEST(LoaderShape, OtherCommandsAndOtherShapesAreRefused) {
  for (int32_t cmd : {BPF_MAP_DELETE_ELEM, BPF_LINK_CREATE,
                      BPF_RAW_TRACEPOINT_OPEN, BPF_PROG_ATTACH}) {
    ObjectLoader l;
    l.rewrite();
    l.sys_bpf(cmd, 3000, 16);
    EXPECT_FALSE(only_allowed_calls(l.insns, kOwn, SIZE_MAX)) << cmd;
  }
  // A command from a register, not an immediate.
  ObjectLoader r;
  r.rewrite();
  r.add(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0);
  r.data_address(BPF_REG_2, 3000);
  r.add(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, 16);
  r.add(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sys_bpf);
  EXPECT_FALSE(only_allowed_calls(r.insns, kOwn, SIZE_MAX));
  // A create whose descriptor goes to another register than r7's store.
  ObjectLoader c;
  c.insns[c.creates[2] + 5].src_reg = BPF_REG_8;
  EXPECT_EQ(find_creates(c.insns).size(), 3u);
}

} // namespace
} // namespace offcpu
