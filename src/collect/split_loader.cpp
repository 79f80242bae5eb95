#include "collect/split_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sched.h>

#include <cerrno>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "collect/bpf_setup.h"
#include "collect/bpf_util.h"
#include "collect/generated_loader.h"
#include "collect/light_loader.h"
#include "offcpu.dsplit.skel.h"
#include "util/clock.h"

namespace offcpu {

namespace {

using Skel = offcpu_dsplit_bpf;

struct SkelDeleter {
  void operator()(Skel *s) const { offcpu_dsplit_bpf__destroy(s); }
};

// The programs one libbpf object loads.
struct Share {
#define OFFCPU_SHARE_FIELD(name) bool name = false;
  OFFCPU_PROGS(OFFCPU_SHARE_FIELD)
#undef OFFCPU_SHARE_FIELD
};

// How a share loads: by which loader (on return: which did), failing on
// purpose (--fail-load split), and on which CPU (-1: any).
struct ShareHow {
  ShareLoader loader;
  bool fail;
  int cpu;
};

// Two CPUs this thread may run on, the one it is on first: {-1, -1} where
// it may run on one only.
std::pair<int, int> two_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
      CPU_COUNT(&allowed) < 2)
    return {-1, -1};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(static_cast<unsigned>(c), &allowed))
      cpus.push_back(c);
  const int here = sched_getcpu();
  const int first =
      here >= 0 && CPU_ISSET(static_cast<unsigned>(here), &allowed) ? here
                                                                    : cpus[0];
  for (int c : cpus)
    if (c > first)
      return {first, c};
  return {first, cpus[0]}; // first is the last: the lowest is another
}

// Gives every map of `skel` the light object's, in the object's order (both
// skeletons list the same object's maps), but .rodata: this object's own
// settings, where the light one's cut every program short.
int reuse_light_maps(Skel *skel, const std::vector<int> &fds, bool fail) {
  size_t i = 0;
  bpf_map *m = nullptr;
  bpf_object__for_each_map(m, skel->obj) {
    if (i >= fds.size())
      return -EINVAL;
    const int fd = fds[i++];
    if (m == skel->maps.rodata)
      continue;
    if (fail && m == skel->maps.counts) {
      bpf_map__set_max_entries(m, UINT32_MAX);
      continue;
    }
    if (!same_map_shape(fd, m))
      return -EINVAL;
    if (int err = bpf_map__reuse_fd(m, fd); err != 0)
      return err;
  }
  return i == fds.size() ? 0 : -EINVAL;
}

std::unique_ptr<Skel, SkelDeleter> open_share(const offcpu_settings &settings,
                                              const Share &share) {
  std::unique_ptr<Skel, SkelDeleter> skel(offcpu_dsplit_bpf__open());
  if (!skel)
    return skel;
  write_settings(skel->rodata, settings);
#define OFFCPU_SET_LOAD(name)                                                  \
  bpf_program__set_autoload(skel->progs.name, share.name);
  OFFCPU_PROGS(OFFCPU_SET_LOAD)
#undef OFFCPU_SET_LOAD
  return skel;
}

// Loads `share` through a loader libbpf generates (load_generated): 0, or
// the load's error; *unknown_shape: this libbpf's loader is not the shape
// expected (nothing loaded).
int load_share_generated(const std::vector<int> &fds,
                         const offcpu_settings &settings, const Share &share,
                         const ShareHow &how, SplitPrograms *out,
                         bool *unknown_shape) {
  std::unique_ptr<Skel, SkelDeleter> skel = open_share(settings, share);
  if (!skel)
    return errno ? -errno : -ENOMEM;
  GeneratedLoad in;
  in.map_fds = fds;
  in.fail_map = how.fail ? skel->maps.counts : nullptr;
  in.cpu = how.cpu;
  std::vector<UniqueFd> progs;
  if (int err = load_generated(skel->obj, in, &progs, unknown_shape))
    return err;
  size_t k = 0;
  bpf_program *p = nullptr;
  bpf_object__for_each_program(p, skel->obj) {
    if (!bpf_program__autoload(p))
      continue;
    if (k >= progs.size())
      return -EINVAL;
#define OFFCPU_TAKE_FD(name)                                                   \
  if (p == skel->progs.name)                                                   \
    out->name = std::move(progs[k]);
    OFFCPU_PROGS(OFFCPU_TAKE_FD)
#undef OFFCPU_TAKE_FD
    ++k;
  }
  return 0;
}

// Opens, loads and lets go one libbpf object with `share`'s programs,
// keeping their descriptors in `out` (each share fills its own): through a
// generated loader where this libbpf's is the shape expected and `how`
// asks for it, else by libbpf. how->loader: which did.
int load_share(const std::vector<int> &fds, const offcpu_settings &settings,
               const Share &share, ShareHow *how, SplitPrograms *out) {
  if (how->loader == ShareLoader::Generated) {
    bool unknown_shape = false;
    int err =
        load_share_generated(fds, settings, share, *how, out, &unknown_shape);
    if (!unknown_shape)
      return err;
    how->loader = ShareLoader::Libbpf;
  }
  std::unique_ptr<Skel, SkelDeleter> skel = open_share(settings, share);
  if (!skel)
    return errno ? -errno : -ENOMEM;
  int err = reuse_light_maps(skel.get(), fds, how->fail);
  if (err == 0)
    err = offcpu_dsplit_bpf__load(skel.get());
  if (err != 0)
    return err < 0 ? err : -err;
#define OFFCPU_KEEP_FD(name)                                                   \
  if (share.name) {                                                            \
    int fd = fcntl(bpf_program__fd(skel->progs.name), F_DUPFD_CLOEXEC, 0);     \
    if (fd < 0)                                                                \
      return -errno;                                                           \
    out->name.reset(fd);                                                       \
  }
  OFFCPU_PROGS(OFFCPU_KEEP_FD)
#undef OFFCPU_KEEP_FD
  return 0;
}

// The maps of `light`, in the object's order, each big one's descriptor
// replaced by the split load's real one in `big`.
int light_maps(offcpu_light *light, const SplitPrograms &big,
               std::vector<int> *out) {
  std::vector<int> &fds = *out;
  fds.assign(64, -1);
  const size_t maps = offcpu_light_map_fds(light, fds.data(), fds.size());
  if (maps > fds.size())
    return -E2BIG;
  fds.resize(maps);
  offcpu_fds small{};
  offcpu_light_get_fds(light, &small);
  for (int &fd : fds) {
#define OFFCPU_USE_BIG(name)                                                   \
  if (fd == small.name)                                                        \
    fd = big.maps.name.get();
    OFFCPU_SPLIT_BIG_MAPS(OFFCPU_USE_BIG)
#undef OFFCPU_USE_BIG
  }
  return 0;
}

} // namespace

int create_split_maps(const offcpu_map_sizes &sizes, SplitPrograms *out) {
  // The object's definitions (type, key, value, flags): never a second copy.
  std::unique_ptr<Skel, SkelDeleter> skel(offcpu_dsplit_bpf__open());
  if (!skel)
    return errno ? -errno : -ENOMEM;
  auto create = [](const bpf_map *m, uint32_t entries, UniqueFd *fd) {
    LIBBPF_OPTS(bpf_map_create_opts, opts);
    opts.map_flags = bpf_map__map_flags(m);
    fd->reset(bpf_map_create(bpf_map__type(m), bpf_map__name(m),
                             bpf_map__key_size(m), bpf_map__value_size(m),
                             entries, &opts));
    return fd->get() >= 0 ? 0 : -errno;
  };
#define OFFCPU_CREATE_BIG(name)                                                \
  if (int err = create(skel->maps.name, sizes.name, &out->maps.name))          \
    return err;
  OFFCPU_SPLIT_BIG_MAPS(OFFCPU_CREATE_BIG)
#undef OFFCPU_CREATE_BIG
  return 0;
}

int load_split_programs(offcpu_light *light, const offcpu_settings &settings,
                        const SplitWant &want, SplitPrograms *out,
                        SplitTimes *times) {
  std::vector<int> fds;
  if (int err = light_maps(light, *out, &fds))
    return err;
  // Two shares of about the same verifier time (log_level 4 here, with
  // --wakers): the switch hook (~130 ms) and the stop pass's iterator (~23)
  // against the waking hook (~105) and the iterators that open the waits
  // in progress (~35); without the waking hook, the switch hook against
  // the three iterators.
  // Without the edges' iterators (loaded after the attach): the two hooks,
  // the one that opens the waits in progress with the switch hook (in the
  // waking hook's share it took ~25 ms more there); without the waking
  // hook, the switch hook against that iterator alone.
  Share first, second;
  first.offcpu_switch_btf = true;
  first.offcpu_fork_btf = want.fork;
  second.offcpu_waking_btf = want.waking;
  if (want.edges) {
    first.offcpu_flush = want.waking;
    first.offcpu_seed_open = !want.waking;
    second.offcpu_seed_stacks = true;
    second.offcpu_seed_open = want.waking;
    second.offcpu_flush = !want.waking;
  } else {
    first.offcpu_seed_open = want.waking;
    second.offcpu_seed_open = !want.waking;
  }
  int second_err = 0;
  const uint64_t t0 = monotonic_ns();
  // Each generated loader on a CPU of its own (see GeneratedLoad::cpu).
  const std::pair<int, int> cpus = two_cpus();
  ShareHow first_how{want.loader, want.fail, cpus.first};
  ShareHow second_how{want.loader, false, cpus.second};
  auto load_second = [&] {
    second_err = load_share(fds, settings, second, &second_how, out);
    times->second_ns = monotonic_ns() - t0;
  };
  std::thread other;
  try {
    other = std::thread(load_second);
  } catch (const std::system_error &) {
    load_second(); // no thread to be had: one after the other
  }
  // The first share has no waking hook: no stack of its cut.
  offcpu_settings first_settings = settings;
  first_settings.cut_irq_stacks = false;
  int err = load_share(fds, first_settings, first, &first_how, out);
  times->first_ns = monotonic_ns() - t0;
  if (other.joinable())
    other.join();
  times->first = first_how.loader;
  times->second = second_how.loader;
  return err != 0 ? err : second_err;
}

int load_edge_programs(offcpu_light *light, const SplitPrograms &big,
                       const offcpu_settings &settings, bool fail,
                       ShareLoader *loader, SplitPrograms *out) {
  std::vector<int> fds;
  if (int err = light_maps(light, big, &fds))
    return err;
  Share edges;
  edges.offcpu_seed_stacks = true;
  edges.offcpu_flush = true;
  offcpu_settings real = settings; // these programs run in full
  real.edges_later = false;
  real.cut_irq_stacks = false; // no waker's stack among them
  ShareHow how{*loader, fail, -1};
  int err = load_share(fds, real, edges, &how, out);
  *loader = how.loader;
  return err;
}

} // namespace offcpu
