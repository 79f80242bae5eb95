#include "collect/loader_shape.h"

#include <cstddef>

namespace offcpu {

namespace {

bool is_data_address(const bpf_insn &i, uint8_t reg) {
  return i.code == (BPF_LD | BPF_DW | BPF_IMM) && i.dst_reg == reg &&
         i.src_reg == BPF_PSEUDO_MAP_IDX_VALUE && i.imm == 0;
}

bool is_mov_imm(const bpf_insn &i, uint8_t reg, int32_t imm) {
  return i.code == (BPF_ALU64 | BPF_MOV | BPF_K) && i.dst_reg == reg &&
         i.src_reg == 0 && i.off == 0 && i.imm == imm;
}

} // namespace

std::vector<CreateCall> find_creates(const std::vector<bpf_insn> &insns) {
  std::vector<CreateCall> out;
  for (size_t k = 0; k + 9 < insns.size(); ++k) {
    const bpf_insn *i = &insns[k];
    if (is_mov_imm(i[0], BPF_REG_1, BPF_MAP_CREATE) &&
        is_data_address(i[1], BPF_REG_2) &&
        i[3].code == (BPF_ALU64 | BPF_MOV | BPF_K) &&
        i[3].dst_reg == BPF_REG_3 && i[4].code == (BPF_JMP | BPF_CALL) &&
        i[4].imm == BPF_FUNC_sys_bpf &&
        i[5].code == (BPF_ALU64 | BPF_MOV | BPF_X) &&
        i[5].dst_reg == BPF_REG_7 && i[5].src_reg == BPF_REG_0 &&
        i[6].code == (BPF_JMP | BPF_JSLT | BPF_K) &&
        i[6].dst_reg == BPF_REG_7 && i[6].imm == 0 &&
        is_data_address(i[7], BPF_REG_1) &&
        i[9].code == (BPF_STX | BPF_MEM | BPF_W) && i[9].dst_reg == BPF_REG_1 &&
        i[9].src_reg == BPF_REG_7 && i[9].off == 0)
      out.push_back({k + 4, static_cast<uint32_t>(i[2].imm), i[8].imm});
  }
  return out;
}

// The call that writes a data map's initial value (the map in fd_array's
// `slot`), as libbpf 1.1's gen_loader writes it:
//   r2 = &data[slot]; r0 = *(u32 *)r2; r1 = &data[attr + map_fd];
//   *(u32 *)r1 = r0; (the key's and the value's addresses into the attr);
//   r1 = BPF_MAP_UPDATE_ELEM; r2 = &data[attr]; r3 = size; call sys_bpf
// Its index, or 0 where there is not exactly one.
size_t find_update(const std::vector<bpf_insn> &insns, int32_t slot) {
  size_t found = 0, count = 0;
  for (size_t k = 0; k + 20 < insns.size(); ++k) {
    const bpf_insn *i = &insns[k];
    if (is_data_address(i[0], BPF_REG_2) && i[1].imm == slot &&
        i[2].code == (BPF_LDX | BPF_MEM | BPF_W) && i[2].dst_reg == BPF_REG_0 &&
        i[2].src_reg == BPF_REG_2 && i[2].off == 0 &&
        is_data_address(i[3], BPF_REG_1) &&
        i[5].code == (BPF_STX | BPF_MEM | BPF_W) && i[5].dst_reg == BPF_REG_1 &&
        i[5].src_reg == BPF_REG_0 &&
        is_mov_imm(i[16], BPF_REG_1, BPF_MAP_UPDATE_ELEM) &&
        is_data_address(i[17], BPF_REG_2) &&
        i[4].imm ==
            i[18].imm + static_cast<int32_t>(offsetof(bpf_attr, map_fd)) &&
        i[20].code == (BPF_JMP | BPF_CALL) && i[20].imm == BPF_FUNC_sys_bpf) {
      found = k + 20;
      ++count;
    }
  }
  return count == 1 ? found : 0;
}

namespace {

// The fd_array slot whose descriptor the code before the system call at
// `call` moves into its attr's map_fd (`attr`: the attr's offset), as
// gen_loader's move from the data to the data writes it:
//   r2 = &data[slot]; r0 = *(u32 *)r2; r1 = &data[attr + map_fd];
//   *(u32 *)r1 = r0
// -1 where there is none in the 40 instructions before.
int32_t slot_feeding(const std::vector<bpf_insn> &insns, size_t call,
                     int32_t attr) {
  const int32_t field = attr + static_cast<int32_t>(offsetof(bpf_attr, map_fd));
  for (size_t k = call > 40 ? call - 40 : 0; k + 6 <= call; ++k) {
    const bpf_insn *i = &insns[k];
    if (is_data_address(i[0], BPF_REG_2) &&
        i[2].code == (BPF_LDX | BPF_MEM | BPF_W) && i[2].dst_reg == BPF_REG_0 &&
        i[2].src_reg == BPF_REG_2 && i[2].off == 0 &&
        is_data_address(i[3], BPF_REG_1) && i[4].imm == field &&
        i[5].code == (BPF_STX | BPF_MEM | BPF_W) && i[5].dst_reg == BPF_REG_1 &&
        i[5].src_reg == BPF_REG_0 && i[5].off == 0)
      return i[1].imm;
  }
  return -1;
}

} // namespace

// Whether every system call left in the rewritten loader is one it may
// make: loading the object's BTF and its programs, writing and freezing the
// read-only data maps this load created (`own`: by fd_array slot), and
// creating `fail_call`'s map. A loader of another shape (another libbpf,
// a map kind this code does not know) could otherwise act on the live
// maps it was given.
bool only_allowed_calls(const std::vector<bpf_insn> &insns,
                        const std::vector<bool> &own, size_t fail_call) {
  for (size_t c = 0; c < insns.size(); ++c) {
    const bpf_insn &call = insns[c];
    if (call.code != (BPF_JMP | BPF_CALL) || call.src_reg != 0 ||
        call.imm != BPF_FUNC_sys_bpf)
      continue;
    if (c < 4 || insns[c - 4].code != (BPF_ALU64 | BPF_MOV | BPF_K) ||
        insns[c - 4].dst_reg != BPF_REG_1 ||
        !is_data_address(insns[c - 3], BPF_REG_2))
      return false;
    switch (insns[c - 4].imm) {
    case BPF_BTF_LOAD:
    case BPF_PROG_LOAD:
      break;
    case BPF_MAP_CREATE:
      if (c != fail_call)
        return false;
      break;
    case BPF_MAP_UPDATE_ELEM:
    case BPF_MAP_FREEZE: {
      const int32_t slot = slot_feeding(insns, c, insns[c - 2].imm);
      const size_t i = static_cast<size_t>(slot) / sizeof(int);
      if (slot < 0 || slot % static_cast<int32_t>(sizeof(int)) != 0 ||
          i >= own.size() || !own[i])
        return false;
      break;
    }
    default:
      return false;
    }
  }
  return true;
}

} // namespace offcpu
