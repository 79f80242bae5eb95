#include "collect/generated_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>
// The loader's context layout (struct bpf_loader_ctx and the map and
// program descriptors after it), the one light skeletons fill.
#include <bpf/skel_internal.h>

namespace offcpu {

namespace {

// A map-creating call in the loader, as libbpf 1.1's gen_loader writes it:
//   r1 = BPF_MAP_CREATE; r2 = &data[attr]; r3 = size; call sys_bpf; r7 = r0
//   if r7 < 0 goto clean-up; r1 = &data[slot]; *(u32 *)r1 = r7
// (data: the loader's one map, the blob libbpf wrote; slot: the map's in
// fd_array, the data's first words). The call becomes a
// load of the attr's first word, where the given map's descriptor is
// written: r7 holds that descriptor, which the code after it checks and
// stores in the slot the programs' map references resolve through
// (fd_array), as it would a new map's.
struct CreateCall {
  size_t call;   // the call instruction's index
  uint32_t attr; // the attr's offset in the data
  int32_t slot;  // where the descriptor is stored, in the data
};

bool is_data_address(const bpf_insn &i, uint8_t reg) {
  return i.code == (BPF_LD | BPF_DW | BPF_IMM) && i.dst_reg == reg &&
         i.src_reg == BPF_PSEUDO_MAP_IDX_VALUE && i.imm == 0;
}

bool is_mov_imm(const bpf_insn &i, uint8_t reg, int32_t imm) {
  return i.code == (BPF_ALU64 | BPF_MOV | BPF_K) && i.dst_reg == reg &&
         i.src_reg == 0 && i.off == 0 && i.imm == imm;
}

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

// Whether the create call's attr in `data` is `m`'s.
bool creates(const std::vector<char> &data, uint32_t attr, const bpf_map *m) {
  const size_t size = offsetof(bpf_attr, map_extra) + sizeof(__u64);
  if (attr > data.size() || data.size() - attr < size)
    return false;
  bpf_attr a;
  memset(&a, 0, sizeof(a));
  memcpy(&a, data.data() + attr, size);
  return a.map_type == bpf_map__type(m) && a.key_size == bpf_map__key_size(m) &&
         a.value_size == bpf_map__value_size(m) &&
         strncmp(a.map_name, bpf_map__name(m), sizeof(a.map_name) - 1) == 0;
}

bool read_only_data(const bpf_map *m) {
  return bpf_map__is_internal(m) &&
         (bpf_map__map_flags(m) & BPF_F_RDONLY_PROG) != 0;
}

// The loader's context: the header, a descriptor per map, one per program.
struct LoaderContext {
  std::vector<uint64_t> words;
  size_t maps = 0;

  LoaderContext(size_t nr_maps, size_t nr_progs) : maps(nr_maps) {
    const size_t bytes = sizeof(bpf_loader_ctx) +
                         nr_maps * sizeof(bpf_map_desc) +
                         nr_progs * sizeof(bpf_prog_desc);
    words.assign((bytes + 7) / 8, 0);
    header()->sz = static_cast<__u32>(bytes);
  }
  bpf_loader_ctx *header() {
    return reinterpret_cast<bpf_loader_ctx *>(words.data());
  }
  bpf_map_desc *map(size_t i) {
    return reinterpret_cast<bpf_map_desc *>(header() + 1) + i;
  }
  bpf_prog_desc *prog(size_t i) {
    return reinterpret_cast<bpf_prog_desc *>(map(maps)) + i;
  }
};

// The descriptors handed to the loader: it closes them all when it fails
// (its clean-up closes every map slot), so they are its own copies.
class LoaderFds {
public:
  ~LoaderFds() {
    if (!consumed_)
      for (int fd : fds_)
        close(fd);
  }
  // A copy of `fd` at 3 or above (the loader counts 0 as no map): -1 and
  // errno on failure.
  int dup_of(int fd) { return keep(fcntl(fd, F_DUPFD_CLOEXEC, 3)); }
  int keep(int fd) {
    if (fd >= 0)
      fds_.push_back(fd);
    return fd;
  }
  // The loader ran and failed: it closed them.
  void consumed() { consumed_ = true; }

private:
  std::vector<int> fds_;
  bool consumed_ = false;
};

// Runs the loader as a light skeleton would (bpf_load_and_run): `data` in
// an array map, the loader a sleepable BPF_PROG_TYPE_SYSCALL program run
// once on `ctx`. 0, or a negative errno; *ran: whether the loader itself
// ran to a failure (then it closed what it had been given).
int run_loader(const std::vector<bpf_insn> &insns,
               const std::vector<char> &data, LoaderContext *ctx, bool *ran) {
  *ran = false;
  UniqueFd map(bpf_map_create(BPF_MAP_TYPE_ARRAY, "__loader.map", 4,
                              static_cast<__u32>(data.size()), 1, nullptr));
  if (map.get() < 0)
    return -errno;
  const int zero = 0;
  if (bpf_map_update_elem(map.get(), &zero, data.data(), 0) != 0)
    return -errno;
  int map_fd = map.get();
  LIBBPF_OPTS(bpf_prog_load_opts, load);
  load.fd_array = &map_fd;
  load.prog_flags = BPF_F_SLEEPABLE;
  UniqueFd prog(bpf_prog_load(BPF_PROG_TYPE_SYSCALL, "__loader.prog",
                              "Dual BSD/GPL", insns.data(), insns.size(),
                              &load));
  if (prog.get() < 0)
    return -errno;
  LIBBPF_OPTS(bpf_test_run_opts, run);
  run.ctx_in = ctx->words.data();
  run.ctx_size_in = ctx->header()->sz;
  if (bpf_prog_test_run_opts(prog.get(), &run) != 0) {
    // Whether it ran before the call failed is not known: its
    // descriptors are left open rather than perhaps closed twice.
    *ran = true;
    return -errno;
  }
  if (static_cast<int>(run.retval) < 0) {
    *ran = true;
    return static_cast<int>(run.retval);
  }
  return 0;
}

} // namespace

int load_generated(bpf_object *obj, const GeneratedLoad &in,
                   std::vector<UniqueFd> *progs) {
  std::vector<const bpf_map *> maps;
  const bpf_map *m = nullptr;
  bpf_object__for_each_map(m, obj) maps.push_back(m);
  size_t nr_progs = 0;
  bpf_program *p = nullptr;
  bpf_object__for_each_program(p, obj)++ nr_progs;
  if (maps.size() != in.map_fds.size())
    return -EINVAL;

  gen_loader_opts gen{};
  gen.sz = sizeof(gen);
  if (int err = bpf_object__gen_loader(obj, &gen); err != 0)
    return err;
  if (int err = bpf_object__load(obj); err != 0)
    return err;
  std::vector<bpf_insn> insns(gen.insns_sz / sizeof(bpf_insn));
  memcpy(insns.data(), gen.insns, insns.size() * sizeof(bpf_insn));
  std::vector<char> data(gen.data, gen.data + gen.data_sz);
  const std::vector<CreateCall> calls = find_creates(insns);
  if (calls.size() != maps.size() || data.size() < maps.size() * sizeof(int))
    return -ENOTSUP;
  for (size_t i = 0; i < maps.size(); ++i)
    if (calls[i].slot != static_cast<int32_t>(i * sizeof(int)) ||
        !creates(data, calls[i].attr, maps[i]))
      return -ENOTSUP;

  LoaderFds fds;
  LoaderContext ctx(maps.size(), nr_progs);
  for (size_t i = 0; i < maps.size(); ++i) {
    const bpf_map *map = maps[i];
    const int32_t slot = static_cast<int32_t>(i * sizeof(int));
    int fd = -1;
    if (read_only_data(map)) {
      // Filled from the data and frozen by the loader.
      LIBBPF_OPTS(bpf_map_create_opts, opts);
      opts.map_flags = bpf_map__map_flags(map);
      fd = fds.keep(bpf_map_create(BPF_MAP_TYPE_ARRAY, bpf_map__name(map), 4,
                                   bpf_map__value_size(map), 1, &opts));
    } else {
      fd = fds.dup_of(in.map_fds[i]);
      if (bpf_map__is_internal(map)) {
        // .bss is live (the edges' iterators load while the hooks run):
        // the loader's write of its initial value becomes r0 = 0.
        const size_t update = find_update(insns, slot);
        if (update == 0)
          return -ENOTSUP;
        insns[update] = bpf_insn{static_cast<__u8>(BPF_ALU64 | BPF_MOV | BPF_K),
                                 BPF_REG_0, 0, 0, 0};
      }
    }
    if (fd < 0)
      return -errno;
    // fd_array: the data's first words (libbpf's first allocation there).
    memcpy(data.data() + slot, &fd, sizeof(int));
    if (map == in.fail_map) {
      ctx.map(i)->max_entries = UINT32_MAX;
      continue; // created by the loader, which fails there
    }
    memcpy(data.data() + calls[i].attr, &fd, sizeof(int));
    insns[calls[i].call] =
        bpf_insn{static_cast<__u8>(BPF_LDX | BPF_MEM | BPF_W), BPF_REG_0,
                 BPF_REG_2, 0, 0};
  }
  bool ran = false;
  if (int err = run_loader(insns, data, &ctx, &ran); err != 0) {
    if (ran)
      fds.consumed();
    return err;
  }
  size_t k = 0;
  progs->clear();
  bpf_object__for_each_program(p, obj) {
    if (bpf_program__autoload(p))
      progs->emplace_back(ctx.prog(k++)->prog_fd);
  }
  return 0;
}

} // namespace offcpu
