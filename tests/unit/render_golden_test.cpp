// Every output format of both commands, rendered from one fixed set of
// samples and compared byte for byte with files in tests/golden/: the
// render path may be reorganized, its output may not change unnoticed.
// OFFCPU_UPDATE_GOLDEN=1 rewrites the files (review the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "offcpu/shared.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/pprof.h"
#include "output/render.h"

namespace offcpu {
namespace {

struct FrameSpec {
  const char *name;
  const char *module; // path, or null
  const char *build_id;
};

struct SampleSpec {
  uint32_t tgid, tid;
  const char *comm;
  std::vector<FrameSpec> user, kernel; // root first
  bool user_missed, kernel_missed, nosched;
  uint64_t total_ns, count;
  // Lock waits only.
  uint64_t max_ns;
  bool write;
  const char *lock;
};

const std::vector<SampleSpec> &specs() {
  static const FrameSpec libc{"start_thread", "/usr/lib/libc.so.6", "abc123"};
  static const FrameSpec app_main{"main", "/opt/app/bin/app", "feed01"};
  static const FrameSpec worker{"worker_loop", "/opt/app/bin/app", "feed01"};
  static const FrameSpec blocker{"block_in_read", "/opt/app/bin/app", "feed01"};
  static const FrameSpec jit{"LazyCompile:*handle <x>&\"y\"", "[perf-map]", ""};
  static const FrameSpec anon{"[anon]", "[anon]", ""};
  auto k = [](const char *n) { return FrameSpec{n, "[kernel.kallsyms]", ""}; };
  static const std::vector<SampleSpec> all = {
      {100,
       101,
       "app",
       {libc, worker, blocker},
       {k("entry_SYSCALL_64"), k("do_syscall_64"), k("ksys_read"),
        k("schedule"), k("__schedule")},
       false,
       false,
       false,
       2500000000,
       12,
       900000000,
       true,
       "mmap_lock"},
      {100,
       102,
       "app",
       {libc, worker, blocker},
       {k("entry_SYSCALL_64"), k("do_syscall_64"), k("ksys_read"),
        k("schedule"), k("__schedule")},
       false,
       false,
       false,
       1250000,
       3,
       800000,
       true,
       "mmap_lock"},
      {100,
       100,
       "app",
       {app_main},
       {k("do_nanosleep"), k("__schedule")},
       false,
       false,
       true,
       777777,
       1,
       777777,
       false,
       "uts_sem+0x10"},
      {200,
       200,
       "node",
       {jit, anon},
       {},
       false,
       true,
       false,
       42000000,
       7,
       9000000,
       true,
       "0xffff888004c3a000"},
      {300,
       301,
       "kworker/0:1",
       {},
       {k("worker_thread"), k("__schedule")},
       false,
       false,
       false,
       3000000,
       30,
       100000,
       true,
       "mmap_lock"},
      {400,
       401,
       "bad\\xff name;x",
       {},
       {},
       true,
       false,
       false,
       1600,
       2,
       900,
       false,
       "mmap_lock"},
      {400,
       402,
       "tiny",
       {app_main},
       {k("__schedule")},
       false,
       false,
       false,
       400,
       1,
       400,
       true,
       "mmap_lock"},
  };
  return all;
}

Profile build(ProfileKind kind) {
  Profile p;
  p.kind = kind;
  p.time_nanos = 1700000000000000000;
  p.duration_nanos = 5000000000;
  p.comment = "offcpu golden";
  // Addresses as a stack holds them: files mapped in the process's range
  // of that file, the kernel high up; every frame but the leaf returns.
  auto frames = [&p](const std::vector<FrameSpec> &specs, FrameKind k) {
    std::vector<Frame> out;
    for (size_t i = 0; i < specs.size(); i++) {
      const FrameSpec &f = specs[i];
      uint32_t module = f.module ? p.module(f.module, f.build_id) : kNoModule;
      uint64_t base = k == FrameKind::Kernel
                          ? 0xffffffff81000000
                          : 0x7f0000000000 + module * 0x100000;
      uint64_t address =
          base + 0x1000 + 0x40 * (std::string(f.name).size() + i);
      Frame frame{f.name, k, module, address, kNoMapping, i + 1 < specs.size()};
      if (k == FrameKind::User && module != kNoModule)
        frame.mapping = p.mapping({base, base + 0x100000, 0x2000, module});
      out.push_back(frame);
    }
    return out;
  };
  for (const SampleSpec &spec : specs()) {
    Sample s;
    s.tgid = spec.tgid;
    s.tid = spec.tid;
    s.comm = spec.comm;
    s.user = frames(spec.user, FrameKind::User);
    s.kernel = frames(spec.kernel, FrameKind::Kernel);
    s.user_missed = spec.user_missed;
    s.kernel_missed = spec.kernel_missed;
    s.kernel_nosched = spec.nosched;
    s.total_ns = spec.total_ns;
    s.count = spec.count;
    // The waits' lengths: the longest, the rest alike.
    s.latency.max_ns = spec.max_ns;
    s.latency.waits = spec.count;
    s.latency.add_to_bucket(offcpu_hist_bucket(spec.max_ns), 1);
    if (spec.count > 1)
      s.latency.add_to_bucket(
          offcpu_hist_bucket((spec.total_ns - spec.max_ns) / (spec.count - 1)),
          spec.count - 1);
    if (kind == ProfileKind::LockWaits)
      s.lock = LockWait{spec.max_ns, spec.write, spec.lock};
    p.samples.push_back(s);
  }
  return p;
}

void check(const std::string &name, const std::string &bytes) {
  std::string path = std::string(OFFCPU_SOURCE_DIR) + "/tests/golden/" + name;
  if (getenv("OFFCPU_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << bytes;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing " << path
                  << " (OFFCPU_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_TRUE(want.str() == bytes)
      << name << " differs from " << path << "; got:\n"
      << bytes.substr(0, 4000);
}

TEST(Golden, OffCpuFormats) {
  const Profile p = build(ProfileKind::OffCpu);
  for (bool d : {false, true}) {
    std::string sfx = d ? "-d" : "";
    RenderOptions o;
    o.delimited = d;
    check("offcpu" + sfx + ".txt", render(p, OutputFormat::Text, o));
    check("offcpu" + sfx + ".folded", render(p, OutputFormat::Folded, o));
    check("offcpu" + sfx + ".svg", render(p, OutputFormat::Svg, o));
  }
  check("offcpu.pb", encode_pprof(p));
  RenderOptions per_thread;
  per_thread.thread = ThreadFrame::Thread;
  check("offcpu-per-thread.folded",
        render(p, OutputFormat::Folded, per_thread));
  check("offcpu-per-thread.txt", render(p, OutputFormat::Text, per_thread));
  RenderOptions histograms;
  histograms.histograms = true;
  check("offcpu-v.txt", render(p, OutputFormat::Text, histograms));
}

TEST(Golden, LockWaitFormats) {
  const Profile p = build(ProfileKind::LockWaits);
  for (bool d : {false, true}) {
    std::string sfx = d ? "-d" : "";
    RenderOptions o;
    o.delimited = d;
    check("rwsem" + sfx + ".txt", render(p, OutputFormat::Text, o));
    check("rwsem" + sfx + ".folded", render(p, OutputFormat::Folded, o));
  }
  check("rwsem.svg", render(p, OutputFormat::Svg, {}));
  check("rwsem.pb", encode_pprof(p));
  RenderOptions per_pid;
  per_pid.thread = ThreadFrame::Process;
  check("rwsem-per-pid.folded", render(p, OutputFormat::Folded, per_pid));
}

TEST(Golden, FlamegraphFromFoldedInput) {
  const std::string folded = "app;main;read_[k];__schedule_[k] 300\n"
                             "app;main;write 100\n"
                             "bad line\n"
                             "other;x;y;z 12.5\n";
  size_t bad = 0;
  FlameGraphOptions g;
  g.title = "From folded";
  g.count_name = "samples";
  check("flamegraph.svg",
        render_flamegraph(parse_folded_stacks(folded, &bad), g));
  EXPECT_EQ(bad, 1u);
}

} // namespace
} // namespace offcpu
