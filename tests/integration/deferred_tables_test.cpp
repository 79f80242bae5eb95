// Unwind tables built when a walk first reaches their file (whole-system
// runs, Unwinder::defer_files): a process gets tables for its program, the
// C library and the loader at its install, and for its other files once a
// walk reaches them; the walk that reached one is taken again. The real
// binary against tests/workloads/deferred_tables.c, which naps in a library
// of its own (no frame pointers: a walk by frame pointers alone stops in
// it) and maps another it never calls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>

#include "offcpu/unwind.h"
#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"
#include "support/uw_procs.h"
#include "symbolize/proc_maps.h"

namespace offcpu {
namespace {

constexpr const char *kComm = "deferred_tables";

using Share = test::WholeShare;

// The workload's naps, and the part of their time on whole user stacks
// (dt_nap under dt_lib_loop under main).
Share whole_share(const std::string &folded) {
  return test::whole_share(
      folded, kComm, "nanosleep", [](const test::FoldedLine &l) {
        const int nap = test::frame_index(l, "dt_nap");
        const int loop = test::frame_index(l, "dt_lib_loop");
        const int main = test::frame_index(l, "main");
        return nap > 0 && loop == nap - 1 && main == loop - 1;
      });
}

uint64_t number_before(const std::string &text, const std::string &after) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("(\\d+) " + after)))
    return UINT64_MAX;
  return std::stoull(m[1]);
}

// The start of the executable mapping of the file named `name` in process
// `pid`; 0 if none.
uint64_t exec_start(int pid, const std::string &name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream text;
  text << in.rdbuf();
  for (const Mapping &m : parse_proc_maps(text.str()))
    if (m.executable && m.display_name() == name)
      return m.start;
  return 0;
}

// What the walker holds for process `pid` (the uw_procs map, dumped by
// bpftool while offcpu runs): the file of the mapping holding each address
// (UW_FILE_NONE if none holds it).
std::vector<uint64_t> installed_files(const std::string &dump, int pid,
                                      const std::vector<uint64_t> &addrs) {
  std::vector<uint64_t> out(addrs.size(), UW_FILE_NONE);
  const auto procs = test::installed_procs(dump);
  auto it = procs.find(static_cast<uint32_t>(pid));
  if (it == procs.end())
    return out;
  const uw_proc &proc = *it->second;
  for (uint32_t i = 0; i < proc.nr && i < UW_MAX_MAPPINGS; i++)
    for (size_t a = 0; a < addrs.size(); a++)
      if (proc.maps[i].start <= addrs[a] && addrs[a] < proc.maps[i].end)
        out[a] = proc.maps[i].file;
  return out;
}

class DeferredTables : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
  }
};

// Traced with every process: the library the workload naps in gets its
// table once a walk reaches it, and nearly all the naps' time is on whole
// stacks; the library it never calls gets none. What the walker holds for
// the workload is read from the kernel's map while offcpu runs. Four
// seconds: beside 1,000 threads waking every 10 ms (load average 18) the
// workload's tables wait behind theirs, and over 2 s 6-11% of its naps
// came before them (1-2% over 4 s).
TEST_F(DeferredTables, ALibraryGetsItsTableOnceAWalkReachesIt) {
  const char *bpftool = "/usr/sbin/bpftool";
  ASSERT_EQ(access(bpftool, X_OK), 0) << "bpftool builds offcpu: installed";
  test::Subprocess w({WORKLOAD_DEFERRED_TABLES, "1200"});
  ASSERT_EQ(w.read_line(10), "ready");
  const uint64_t used = exec_start(w.pid(), "libdeferred_lib.so");
  const uint64_t unused = exec_start(w.pid(), "libnofp_lib.so");
  ASSERT_TRUE(used && unused);
  test::Subprocess tracer({OFFCPU_BIN, "-f", "-v", "4"});
  test::sleep_seconds(2);
  auto dump = test::run({bpftool, "-j", "map", "dump", "name", "uw_procs"}, 30);
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const std::vector<uint64_t> files =
      installed_files(dump.out, w.pid(), {used, unused});
  EXPECT_LT(files[0], uint64_t{UW_MAX_FILES}) << "the library it naps in";
  EXPECT_EQ(files[1], uint64_t{UW_FILE_DEFERRED}) << "the one it never calls";
  Share s = whole_share(r.out);
  ASSERT_GT(s.sleep_us, 3000000u) << r.out << r.err;
  EXPECT_GE(s.whole(), 0.95) << s.describe() << r.err;
  // Its library was left at the install and reached since; the walks that
  // reached it stopped there, and the unused library stays without one.
  const uint64_t left = number_before(r.err, "files left until a walk");
  const uint64_t reached = number_before(r.err, "built later\\)");
  ASSERT_NE(left, UINT64_MAX) << r.err;
  EXPECT_GE(reached, 1u) << r.err;
  EXPECT_GT(left, reached) << r.err;
  EXPECT_GE(number_before(r.err, "at a file whose table was not built yet"), 1u)
      << r.err;
}

// Whether the kernel places each exec's mappings at random addresses.
bool aslr_on() {
  std::ifstream in("/proc/sys/kernel/randomize_va_space");
  int v = 0;
  return in >> v && v != 0;
}

// The workers of a pre-fork server (children forked without exec) are
// installed with their parent's mappings, files and bases: one content,
// one gen, the key of the walker's cached rules, which they then share
// (each had its own copy before; LayoutGens' unit tests hold the rule
// itself). Another run of the same program, exec'd at addresses of its
// own, gets a gen of its own. All five exist before offcpu starts; each
// is installed when a walk of it finds no tables, and again once its walk
// reached its library. Their naps' stacks stay whole.
TEST_F(DeferredTables, ForkedWorkersShareTheirCachedRules) {
  const char *bpftool = "/usr/sbin/bpftool";
  ASSERT_EQ(access(bpftool, X_OK), 0) << "bpftool builds offcpu: installed";
  test::Subprocess w({WORKLOAD_DEFERRED_TABLES, "2000", "3"});
  const std::optional<std::string> ready = w.read_line(10);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0)
      << ready.value_or("(no line)");
  std::vector<uint32_t> pids{static_cast<uint32_t>(w.pid())};
  std::istringstream listed(ready->substr(6));
  for (uint32_t pid = 0; listed >> pid;)
    pids.push_back(pid);
  ASSERT_EQ(pids.size(), 4u) << *ready;
  test::Subprocess other({WORKLOAD_DEFERRED_TABLES, "2000"});
  ASSERT_EQ(other.read_line(10), "ready");
  const uint32_t exec_pid = static_cast<uint32_t>(other.pid());
  test::Subprocess tracer({OFFCPU_BIN, "-f", "6"});
  std::map<uint32_t, std::shared_ptr<const uw_proc>> procs;
  auto settled = [&] {
    for (uint32_t pid : pids)
      if (!procs.count(pid) || procs[pid]->gen != procs[pids[0]]->gen)
        return false;
    return procs.count(exec_pid) != 0;
  };
  // Polled until then (the map exists once the programs are loaded).
  std::string last_error;
  for (int i = 0; i < 16 && !settled(); i++) {
    test::sleep_seconds(0.3);
    auto dump =
        test::run({bpftool, "-j", "map", "dump", "name", "uw_procs"}, 30);
    if (dump.exit_code == 0)
      procs = test::installed_procs(dump.out);
    else
      last_error = dump.err;
  }
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A child whose first walk came after its parent's install walks with
  // the parent's entry (same_image_parent), gen and all, and is never
  // installed itself: it shares by another way. Those installed share the
  // parent's gen.
  std::string gens;
  size_t own = 0;
  bool alike = procs.count(pids[0]) != 0;
  for (uint32_t pid : pids) {
    auto it = procs.find(pid);
    gens += " " + std::to_string(pid) + ":" +
            (it == procs.end() ? "-" : std::to_string(it->second->gen));
    if (it == procs.end() || pid == pids[0])
      continue;
    own++;
    alike = alike && it->second->gen == procs[pids[0]]->gen;
  }
  ASSERT_TRUE(alike && own >= 1 && procs.count(exec_pid))
      << "the parent and the workers installed on their own share one gen, "
         "the other run is read:"
      << gens << "; other " << (procs.count(exec_pid) ? "read" : "not read")
      << "; " << procs.size() << " processes read; " << last_error;
  const uw_proc &parent = *procs[pids[0]];
  EXPECT_NE(parent.gen, 0u);
  for (uint32_t pid : pids)
    if (procs.count(pid)) {
      EXPECT_EQ(std::memcmp(procs[pid]->maps, parent.maps,
                            parent.nr * sizeof(uw_mapping)),
                0)
          << "process " << pid << ": the same mappings as its parent";
    }
  if (aslr_on()) {
    EXPECT_NE(procs[exec_pid]->gen, parent.gen)
        << "another content, another gen";
  }
  // Over every process installed: a gen names one content (what the cache
  // holds under it is right for all who use it), and a content one gen.
  auto same = [](const uw_proc &a, const uw_proc &b) {
    return a.nr == b.nr &&
           std::memcmp(a.maps, b.maps, a.nr * sizeof(uw_mapping)) == 0;
  };
  for (const auto &[a, pa] : procs)
    for (const auto &[b, pb] : procs)
      if (a < b) {
        EXPECT_EQ(pa->gen == pb->gen, same(*pa, *pb))
            << "processes " << a << " and " << b << ": gens " << pa->gen
            << " and " << pb->gen;
      }
  Share s = whole_share(r.out);
  ASSERT_GT(s.sleep_us, 10000000u) << r.out << r.err;
  EXPECT_GE(s.whole(), 0.95) << s.describe() << r.err;
}

// Traced by -p: every table is built before the window opens (the first
// waits are whole), none left for later.
TEST_F(DeferredTables, PidGetsEveryTableAtOnce) {
  test::Subprocess w({WORKLOAD_DEFERRED_TABLES, "600"});
  ASSERT_EQ(w.read_line(10), "ready");
  auto r = test::run(
      {OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f", "-v", "2"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Share s = whole_share(r.out);
  ASSERT_GT(s.sleep_us, 1500000u) << r.out << r.err;
  EXPECT_GE(s.whole(), 0.99) << s.describe() << r.err;
  EXPECT_EQ(r.err.find("files left until a walk"), std::string::npos) << r.err;
  EXPECT_EQ(number_before(r.err, "at a file whose table was not built yet"), 0u)
      << r.err;
}

// Symbols too are read only for the files the stacks reach: the program,
// its library, libc (and libc's debug file) and the vDSO, not the library
// it never calls nor the loader (8 files were parsed before, 5 now).
TEST_F(DeferredTables, SymbolsAreReadOnlyForFilesInStacks) {
  test::Subprocess w({WORKLOAD_DEFERRED_TABLES, "400"});
  ASSERT_EQ(w.read_line(10), "ready");
  auto r = test::run(
      {OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f", "-v", "1"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(whole_share(r.out).whole(), 0.99) << r.out;
  const uint64_t parsed = number_before(r.err, "ELF files parsed");
  ASSERT_NE(parsed, UINT64_MAX) << r.err;
  EXPECT_LE(parsed, 5u) << r.err;
}

class DeferredSymbols : public test::RootTest {};

// A process mapping 400 files no stack reaches (plugins loaded and idle):
// each waits unparsed with its descriptor open, 256 at most; the rest are
// parsed and closed as before.
TEST_F(DeferredSymbols, FilesInNoStackHoldAtMost256Descriptors) {
  const std::string lib = std::string(WORKLOAD_DEFERRED_TABLES);
  const std::string so = lib.substr(0, lib.rfind('/')) + "/libdeferred_lib.so";
  for (int i = 0; i < 400; i++) {
    const std::string copy = dir_ + "/plugin" + std::to_string(i) + ".so";
    std::filesystem::copy_file(so, copy);
    // Without DWARF: a parsed file keeps no descriptor for it.
    ASSERT_EQ(
        test::run({"/usr/bin/objcopy", "--strip-debug", copy}, 30).exit_code,
        0);
  }
  const char *script = R"(
import mmap, os, sys, time
keep = []
for n in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], n), "rb") as f:
        keep.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC))
print("ready", flush=True)
time.sleep(30)
)";
  test::Subprocess w({"/usr/bin/python3", "-c", script, dir_});
  ASSERT_EQ(w.read_line(20), "ready");
  test::Subprocess tracer(
      {OFFCPU_BIN, "-p", std::to_string(w.pid()), "-f", "3"});
  test::sleep_seconds(2);
  const size_t fds = test::open_fds(tracer.pid());
  auto r = tracer.wait(60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("time_sleep"), std::string::npos) << r.out;
  // About 70 of its own (maps, programs, links, rings) and 256 waiting.
  EXPECT_GT(fds, 256u);
  EXPECT_LT(fds, 256u + 150u);
}

} // namespace
} // namespace offcpu
