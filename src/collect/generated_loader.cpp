#include "collect/generated_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>
// The loader's context layout (struct bpf_loader_ctx and the map and
// program descriptors after it), the one light skeletons fill.
#include <bpf/skel_internal.h>

#include "collect/bpf_util.h"
#include "collect/loader_shape.h"

namespace offcpu {

namespace {

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
  // A copy of `fd` at 3 or above (the loader takes 0 for no map): -1 and
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

// Runs the calling thread on `cpu` until destroyed (-1: as it was). The
// kernel runs a loader with migration disabled: two loaders that started
// on one CPU would verify in turn while the other idles.
class PinnedTo {
public:
  explicit PinnedTo(int cpu) {
    if (cpu < 0 || sched_getaffinity(0, sizeof(was_), &was_) != 0)
      return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<unsigned>(cpu), &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedTo() {
    if (pinned_)
      sched_setaffinity(0, sizeof(was_), &was_);
  }
  PinnedTo(const PinnedTo &) = delete;
  PinnedTo &operator=(const PinnedTo &) = delete;

private:
  cpu_set_t was_{};
  bool pinned_ = false;
};

// Runs the loader as a light skeleton would (bpf_load_and_run): `data` in
// an array map, the loader a sleepable BPF_PROG_TYPE_SYSCALL program run
// once on `ctx`, on `cpu`. 0, or a negative errno; *ran: whether the
// loader itself ran and failed (then it closed what it had been given).
int run_loader(const std::vector<bpf_insn> &insns,
               const std::vector<char> &data, LoaderContext *ctx, int cpu,
               bool *ran) {
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
  PinnedTo pinned(cpu);
  if (bpf_prog_test_run_opts(prog.get(), &run) != 0) {
    // Only copying the context back (EFAULT) fails after the loader ran;
    // the other errors come before it.
    *ran = errno == EFAULT;
    return -errno;
  }
  if (static_cast<int>(run.retval) < 0) {
    *ran = true;
    return static_cast<int>(run.retval);
  }
  return 0;
}

// The loader libbpf generated for `obj`, and the object's maps.
struct Generated {
  std::vector<const bpf_map *> maps;
  size_t programs = 0;
  std::vector<bpf_insn> insns;
  std::vector<char> data;
  std::vector<CreateCall> creates;
};

int generate(bpf_object *obj, Generated *g) {
  const bpf_map *m = nullptr;
  bpf_object__for_each_map(m, obj) g->maps.push_back(m);
  bpf_program *p = nullptr;
  bpf_object__for_each_program(p, obj)++ g->programs;
  gen_loader_opts gen{};
  gen.sz = sizeof(gen);
  if (int err = bpf_object__gen_loader(obj, &gen); err != 0)
    return err;
  if (int err = bpf_object__load(obj); err != 0)
    return err;
  g->insns.resize(gen.insns_sz / sizeof(bpf_insn));
  memcpy(g->insns.data(), gen.insns, g->insns.size() * sizeof(bpf_insn));
  g->data.assign(gen.data, gen.data + gen.data_sz);
  g->creates = find_creates(g->insns);
  return 0;
}

// Whether the generated loader creates each map in the object's order and
// stores it in fd_array's slot of that index, at the data's start.
bool creates_in_order(const Generated &g) {
  if (g.creates.size() != g.maps.size() ||
      g.data.size() < g.maps.size() * sizeof(int))
    return false;
  for (size_t i = 0; i < g.maps.size(); ++i)
    if (g.creates[i].slot != static_cast<int32_t>(i * sizeof(int)) ||
        !creates(g.data, g.creates[i].attr, g.maps[i]))
      return false;
  return true;
}

// Points map `i` of `g` at `fd` instead of a new map: written into its
// fd_array slot and where its create call now reads it.
void give_map(Generated *g, size_t i, int fd) {
  memcpy(g->data.data() + i * sizeof(int), &fd, sizeof(int));
  memcpy(g->data.data() + g->creates[i].attr, &fd, sizeof(int));
  g->insns[g->creates[i].call] = bpf_insn{
      static_cast<__u8>(BPF_LDX | BPF_MEM | BPF_W), BPF_REG_0, BPF_REG_2, 0, 0};
}

// Rewrites `g` to use `in`'s maps (read-only data maps created here):
// 0, -ENOTSUP (*unknown set) where its shape is not the one expected, or a
// negative errno.
int rewrite(Generated *g, const GeneratedLoad &in, LoaderFds *fds,
            LoaderContext *ctx, bool *unknown) {
  std::vector<bool> own(g->maps.size(), false);
  size_t fail_call = SIZE_MAX;
  for (size_t i = 0; i < g->maps.size(); ++i) {
    const bpf_map *map = g->maps[i];
    if (map == in.fail_map) {
      // Created by the loader at a size the kernel refuses; slot 0 until
      // then, so its clean-up closes nothing of this map.
      ctx->map(i)->max_entries = UINT32_MAX;
      fail_call = g->creates[i].call;
      continue;
    }
    int fd = -1;
    if (read_only_data(map)) {
      // Filled from the data and frozen by the loader.
      LIBBPF_OPTS(bpf_map_create_opts, opts);
      opts.map_flags = bpf_map__map_flags(map);
      fd = fds->keep(bpf_map_create(BPF_MAP_TYPE_ARRAY, bpf_map__name(map), 4,
                                    bpf_map__value_size(map), 1, &opts));
      own[i] = true;
    } else {
      if (!same_map_shape(in.map_fds[i], map))
        return -EINVAL; // never the object's own map: never reused
      fd = fds->dup_of(in.map_fds[i]);
      if (bpf_map__is_internal(map)) {
        // .bss is live (the edges' iterators load while the hooks run):
        // the loader's write of its initial value becomes r0 = 0.
        const size_t update =
            find_update(g->insns, static_cast<int32_t>(i * sizeof(int)));
        if (update == 0) {
          *unknown = true;
          return -ENOTSUP;
        }
        g->insns[update] = bpf_insn{
            static_cast<__u8>(BPF_ALU64 | BPF_MOV | BPF_K), BPF_REG_0, 0, 0, 0};
      }
    }
    if (fd < 0)
      return -errno;
    give_map(g, i, fd);
  }
  if (!only_allowed_calls(g->insns, own, fail_call)) {
    *unknown = true;
    return -ENOTSUP;
  }
  return 0;
}

} // namespace

int load_generated(bpf_object *obj, const GeneratedLoad &in,
                   std::vector<UniqueFd> *progs, bool *unknown_shape) {
  *unknown_shape = false;
  Generated g;
  if (int err = generate(obj, &g))
    return err;
  if (g.maps.size() != in.map_fds.size())
    return -EINVAL;
  if (!creates_in_order(g)) {
    *unknown_shape = true;
    return -ENOTSUP;
  }
  LoaderFds fds;
  LoaderContext ctx(g.maps.size(), g.programs);
  if (int err = rewrite(&g, in, &fds, &ctx, unknown_shape))
    return err;
  bool ran = false;
  if (int err = run_loader(g.insns, g.data, &ctx, in.cpu, &ran); err != 0) {
    if (ran)
      fds.consumed();
    return err;
  }
  size_t k = 0;
  progs->clear();
  bpf_program *p = nullptr;
  bpf_object__for_each_program(p, obj) {
    if (bpf_program__autoload(p))
      progs->emplace_back(ctx.prog(k++)->prog_fd);
  }
  return 0;
}

} // namespace offcpu
