// Issue #26, the unwind tables: an unprivileged user's files, mapped
// executable, must not crash offcpu, hold up its window, take more memory
// (user or kernel) than their budgets, or change another process's
// stacks. Each test writes its hostile file at run time (support/
// hostile_cfi.h), has the test user map or run it, and traces root's own
// process (the frame-pointer-less nofp workload, whose stacks need the
// tables) at the same time: its stack must stay whole.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "support/hostile_cfi.h"
#include "support/hostile_fixture.h"

namespace offcpu::test {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// Peak RSS of a run over the small hostile files: offcpu's own (~8 MiB
// here) with room to spare; the runs took 2 GB.
constexpr long kSmallRssKb = 128 * 1024;
// The file with 20M rows: its 60 MB section is read (libelf's copy and
// ours) and 4M rows parsed before its row budget stops it (~150 MiB).
constexpr long kBigRssKb = 256 * 1024;
// Every run is given this --unwind-memory: the tables' maps may grow by
// this much at most, whatever the user maps.
constexpr uint64_t kCapMiB = 16;
const std::vector<std::string> kCap{"--unwind-memory", std::to_string(kCapMiB)};

// Kernel memory of every BPF map `pid` holds (fdinfo's memlock), each map
// once: the split load hands its loaders copies of the maps' descriptors.
uint64_t map_memlock(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  uint64_t sum = 0;
  std::set<uint64_t> seen;
  DIR *d = opendir((dir + "/fd").c_str());
  if (!d)
    return 0;
  while (dirent *e = readdir(d)) {
    char link[64] = {};
    std::string fd = dir + "/fd/" + e->d_name;
    if (readlink(fd.c_str(), link, sizeof(link) - 1) <= 0 ||
        std::strcmp(link, "anon_inode:bpf-map") != 0)
      continue;
    std::string info = slurp(dir + "/fdinfo/" + e->d_name);
    size_t at = info.find("memlock:");
    size_t id = info.find("map_id:");
    if (at != std::string::npos && id != std::string::npos &&
        seen.insert(std::strtoull(info.c_str() + id + 7, nullptr, 10)).second)
      sum += std::strtoull(info.c_str() + at + 8, nullptr, 10);
  }
  closedir(d);
  return sum;
}

struct Measured {
  Timed t;
  uint64_t memlock = 0; // the peak, sampled every 20 ms
};

// run_offcpu, with the kernel memory of its maps measured while it runs.
Measured run_measured(const std::vector<std::string> &args, double window) {
  std::vector<std::string> argv{OFFCPU_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const double t0 = now_seconds();
  Subprocess p(argv);
  Measured m;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{0};
  std::thread poll([&] {
    while (!done) {
      uint64_t v = map_memlock(p.pid());
      if (v > peak)
        peak = v;
      usleep(20000);
    }
  });
  m.t.r = p.wait(window + kKillAfter);
  done = true;
  poll.join();
  m.t.seconds = now_seconds() - t0;
  m.memlock = peak;
  return m;
}

class HostileUnwind : public HostileFiles {
protected:
  static void SetUpTestSuite() {
    HostileFiles::SetUpTestSuite();
    if (!skip_.empty())
      return;
    for (const auto &[from, to] :
         {std::pair<std::string, std::string>{WORKLOAD_MAP_EXEC, map_exec()},
          {WORKLOAD_NOFP, bin_dir_ + "/nofp"},
          {WORKLOAD_NOFP_LIB, bin_dir_ + "/libnofp_lib.so"}})
      if (!ok(run({"/bin/cp", from, to}, 30)) || chmod(to.c_str(), 0755) != 0)
        skip_ = "could not copy " + from + " to " + bin_dir_;
  }

  void SetUp() override {
    HostileFiles::SetUp();
    if (IsSkipped())
      return;
    udir_ = dir_ + "/user";
    mkdir(udir_.c_str(), 0755);
    ASSERT_EQ(chown(udir_.c_str(), uid_, gid_), 0);
    // Root's own process, traced beside each attack.
    root_ = std::make_unique<Subprocess>(std::vector<std::string>{
        bin_dir_ + "/nofp", bin_dir_ + "/libnofp_lib.so"});
    auto line = root_->read_line(60);
    ASSERT_TRUE(line && line->rfind("ready ", 0) == 0) << "nofp did not start";
    root_pid_ = line->substr(6);
  }
  void TearDown() override {
    root_.reset();
    HostileFiles::TearDown();
  }

  static std::string map_exec() { return bin_dir_ + "/map_exec"; }

  // A file the test user owns, in their directory.
  std::string user_file(const std::string &name, const std::string &bytes) {
    std::string path = udir_ + "/" + name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0) << path;
    size_t done = 0;
    while (fd >= 0 && done < bytes.size()) {
      ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0)
        break;
      done += static_cast<size_t>(n);
    }
    EXPECT_EQ(done, bytes.size()) << path;
    close(fd);
    EXPECT_EQ(chown(path.c_str(), uid_, gid_), 0);
    return path;
  }
  // A sparse file of `size` bytes, owned by the test user.
  std::string sparse_user_file(const std::string &name, uint64_t size,
                               const std::string &head = "") {
    std::string path = user_file(name, head);
    EXPECT_EQ(truncate(path.c_str(), static_cast<off_t>(size)), 0) << path;
    return path;
  }

  // Root's process's sleeping thread, walked whole through its tables.
  void expect_root_whole(const std::string &folded, const std::string &what) {
    bool found = false;
    std::istringstream in(folded);
    for (std::string line; std::getline(in, line);)
      if (line.find("-" + root_pid_ + "/") != std::string::npos &&
          line.find("nf_sleep_main;nf_sleep_middle;nf_sleep_inner") !=
              std::string::npos)
        found = true;
    EXPECT_TRUE(found) << what << ": root's process lost its stack:\n"
                       << lines_with(folded, "nf_sleep");
  }

  // The common checks, then the budgets.
  void expect_within(const Measured &m, double window, long rss_kb,
                     uint64_t memlock, const std::string &what) {
    expect_clean_run(m.t, window, what);
    expect_root_whole(m.t.r.out, what);
    EXPECT_LE(m.t.r.max_rss_kb, rss_kb)
        << what << ": peak RSS " << m.t.r.max_rss_kb / 1024 << " MiB";
    EXPECT_GT(m.memlock, 0u) << what << ": no map memory seen";
    EXPECT_LE(m.memlock, memlock)
        << what << ": " << m.memlock / kMiB << " MiB of kernel memory";
    std::cerr << lines_with(m.t.r.err, "warning");
    std::cerr << "[ info ] " << what << ": " << m.t.seconds << " s, peak RSS "
              << m.t.r.max_rss_kb / 1024 << " MiB, maps " << m.memlock / kMiB
              << " MiB\n";
  }

  Measured trace(const Workload &w, double window,
                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"-p", w.pid() + "," + root_pid_,
                                  "--per-thread", "-f",
                                  std::to_string(static_cast<int>(window))};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), kCap.begin(), kCap.end());
    return run_measured(args, window);
  }

  // What a run of root's process alone takes in kernel memory, and the
  // budget of a run beside a hostile process: that, and the cap.
  uint64_t memlock_budget() {
    std::vector<std::string> args{"-p", root_pid_, "-f", "1"};
    args.insert(args.end(), kCap.begin(), kCap.end());
    Measured m = run_measured(args, 1);
    EXPECT_EQ(m.t.r.exit_code, 0) << m.t.r.err;
    return m.memlock + kCapMiB * kMiB;
  }

  std::string udir_, root_pid_;
  std::unique_ptr<Subprocess> root_;
};

TEST_F(HostileUnwind, FdesFarApartCostOnlyTheirRows) {
  EhFrame e;
  e.fde(0x1000, 0x100, "\x41\x0e\x10");
  e.fde(0x1000 + (uint64_t{1} << 47), 0x100, "\x41\x0e\x10");
  e.fde(~uint64_t{0} - 0x1fff, 0x1000, "\x41\x0e\x10");
  // Outside the executable segment, then inside one 2^47 bytes long.
  std::string a = user_file("apart", elf_with_cfi(e.section(), 0x2000));
  std::string b = user_file(
      "covered", elf_with_cfi(e.section(), (uint64_t{1} << 47) + 0x2000));
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), a, b});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kSmallRssKb, budget, "FDEs 2^47 apart and near 2^64");
  EXPECT_NE(m.t.r.err.find("outside their file's executable segments"),
            std::string::npos)
      << m.t.r.err;
}

TEST_F(HostileUnwind, RwsemSurvivesFdesFarApart) {
  // offcpu rwsem builds the same tables (it crashed the same way).
  EhFrame e;
  e.fde(0x1000, 0x100, "\x41\x0e\x10");
  e.fde(0x1000 + (uint64_t{1} << 47), 0x100, "\x41\x0e\x10");
  std::string f = user_file(
      "covered", elf_with_cfi(e.section(), (uint64_t{1} << 47) + 0x2000));
  Workload w = start({map_exec(), f});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t =
      run_offcpu({"rwsem", "-p", w.pid() + "," + root_pid_, "-i", "0", "2"}, 2);
  expect_clean_run(t, 2, "offcpu rwsem, FDEs 2^47 apart");
}

TEST_F(HostileUnwind, FdesTwoToTheFortyApartOverPageBudget) {
  EhFrame e;
  for (uint64_t i = 0; i < 1000; i++)
    e.fde(0x1000 + (i << 40), 0x100, "\x41\x0e\x10");
  std::string f =
      user_file("apart40", elf_with_cfi(e.section(), uint64_t{1} << 50));
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), f});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kSmallRssKb, budget, "FDEs 2^40 apart");
  EXPECT_NE(m.t.r.err.find("1 files over their page budget"), std::string::npos)
      << m.t.r.err;
}

TEST_F(HostileUnwind, AlternatingRowsOverRowBudget) {
  // 20M rows in 50,000 FDEs: a 60 MB .eh_frame.
  EhFrame e;
  const std::string code = EhFrame::alternating(400);
  for (uint64_t i = 0; i < 50000; i++)
    e.fde(0x1000 + i * 400, 400, code);
  std::string f =
      user_file("alternating", elf_with_cfi(e.section(), 0x1000 + 50000 * 400));
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), f});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kBigRssKb, budget, "60 MB .eh_frame of alternating rows");
  // Its row budget stops it; on a loaded machine (2 vCPUs shared with
  // builds), reading 60 MB may spend its time budget first: either way it
  // is skipped and counted.
  EXPECT_TRUE(
      m.t.r.err.find("1 files over their row budget") != std::string::npos ||
      m.t.r.err.find("1 files over their time budget") != std::string::npos)
      << m.t.r.err;
}

TEST_F(HostileUnwind, DistinctRulesOverRuleBudget) {
  // 70,000 rows, each its own CFA offset: more than the whole run's
  // 65,536-rule table, were they all kept.
  EhFrame e;
  for (uint64_t i = 0; i < 7; i++)
    e.fde(0x1000 + i * 0x10000, 0x10000, EhFrame::distinct(10000));
  std::string f = user_file("rules", elf_with_cfi(e.section(), 0x80000));
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), f});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kSmallRssKb, budget, "70,000 distinct rules");
  EXPECT_NE(m.t.r.err.find("1 files over their rule budget"), std::string::npos)
      << m.t.r.err;
}

TEST_F(HostileUnwind, TerabyteSparseMappingStaysInTheMemoryCap) {
  // Not even ELF, and an ELF whose code segment is 1 TiB with FDEs at both
  // ends.
  std::string zeros = sparse_user_file("tera", uint64_t{1} << 40);
  EhFrame e;
  e.fde(0x1000, 0x100, "\x41\x0e\x10");
  e.fde((uint64_t{1} << 40) - 0x1000, 0x100, "\x41\x0e\x10");
  std::string elf = elf_with_cfi(e.section(), uint64_t{1} << 40);
  std::string tera_elf = sparse_user_file("tera.so", uint64_t{1} << 40, elf);
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), zeros, tera_elf});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  // The estimate from 2 TiB of code is held to the cap.
  expect_within(m, 2, kSmallRssKb, budget, "1 TiB sparse mapping");
  EXPECT_EQ(m.t.r.err.find("no room"), std::string::npos) << m.t.r.err;
}

TEST_F(HostileUnwind, LongCieSharedByManyFdesRunsOnce) {
  // One CIE of 99,990 no-ops shared by 100k FDEs: built in milliseconds.
  EhFrame e(99990);
  for (uint64_t i = 0; i < 100000; i++)
    e.fde(0x1000 + i * 16, 16, "\x41\x0e\x10");
  std::string cie = user_file("longcie", elf_with_cfi(e.section(), 0x200000));
  // 100k FDEs of 200 no-ops each: 20M steps, over the file's step budget.
  EhFrame n;
  const std::string nops(200, '\0');
  for (uint64_t i = 0; i < 100000; i++)
    n.fde(0x1000 + i * 16, 16, nops);
  std::string steps = user_file("steps", elf_with_cfi(n.section(), 0x200000));
  const uint64_t budget = memlock_budget();
  Workload w = start({map_exec(), cie, steps});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 3, {"-v"});
  expect_within(m, 3, kSmallRssKb, budget, "a long CIE shared by 100k FDEs");
  EXPECT_NE(m.t.r.err.find("1 files over their CFI step budget"),
            std::string::npos)
      << m.t.r.err;
}

TEST_F(HostileUnwind, SigtermEndsTheRunWhileDebugFilesAreChecked) {
  // Ten sparse 128 MiB binaries, each with a debuglink to a 4 GiB sparse
  // file (within 32 times its binary): each CRC would take seconds and
  // gets its file's time budget, 1 s; SIGTERM comes in the middle.
  std::vector<std::string> argv{map_exec()};
  for (int i = 0; i < 10; i++) {
    std::string n = std::to_string(i);
    sparse_user_file("big" + n + ".debug", uint64_t{4} << 30);
    argv.push_back(sparse_user_file(
        "big" + n, uint64_t{128} << 20,
        elf_with_cfi("", 0x2000, "big-id-" + n, "big" + n + ".debug")));
  }
  Workload w = start(argv);
  ASSERT_TRUE(w.ready()) << w.error();
  Subprocess p({OFFCPU_BIN, "-v", "-p", w.pid() + "," + root_pid_,
                "--per-thread", "-f", "30"});
  sleep_seconds(2.5);
  const double t0 = now_seconds();
  p.signal(SIGTERM);
  RunResult r = p.wait(10);
  const double took = now_seconds() - t0;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(took, 1.0) << "SIGTERM ended the run " << took << " s later\n"
                       << r.err;
  // Root's process, asked for after the user's, was installed between
  // the user's costly files.
  expect_root_whole(r.out, "SIGTERM while checking debug files");
  // The file being checked at the signal is dropped, not finished; or,
  // the run's 2 s of CRCs spent before the signal, none was being checked
  // and the rest were not checked at all (util/debug_file.h).
  EXPECT_TRUE(
      r.err.find(" 1 dropped at the end of the run") != std::string::npos ||
      r.err.find("debug files not checked: the run's") != std::string::npos)
      << r.err;
  std::cerr << lines_with(r.err, "user unwind tables")
            << lines_with(r.err, "budget");
  std::cerr << "[ info ] SIGTERM while checking debug files: ended " << took
            << " s later, peak RSS " << r.max_rss_kb / 1024 << " MiB\n";
}

TEST_F(HostileUnwind, DebuglinksToHugeSparseFilesAreNotRead) {
  std::vector<std::string> argv{map_exec()};
  for (int i = 0; i < 10; i++) {
    std::string n = std::to_string(i);
    sparse_user_file("d" + n + ".debug", uint64_t{4} << 30);
    argv.push_back(
        user_file("linked" + n, elf_with_cfi("", 0x2000, "build-id-" + n,
                                             "d" + n + ".debug")));
  }
  const uint64_t budget = memlock_budget();
  Workload w = start(argv);
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kSmallRssKb, budget,
                "ten debuglinks to 4 GiB sparse files");
  EXPECT_NE(m.t.r.err.find("debug files larger than their binary allows"),
            std::string::npos)
      << m.t.r.err;
}

// Offset and size of a section, from the file's own headers.
std::pair<size_t, size_t> section_of(const std::string &elf,
                                     const std::string &name) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  Elf64_Shdr strs;
  std::memcpy(&strs, elf.data() + eh.e_shoff + eh.e_shstrndx * sizeof(strs),
              sizeof(strs));
  for (size_t i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (elf.c_str() + strs.sh_offset + sh.sh_name == name)
      return {sh.sh_offset, sh.sh_size};
  }
  return {0, 0};
}

TEST_F(HostileUnwind, SameBuildIdCopyDoesNotPoisonRootsTables) {
  // The user's copy of root's binary, same build id, its CIE's "return
  // address at CFA - 8" (DW_CFA_offset r16) turned into "undefined": every
  // frame of its own code ends the stack.
  std::string elf = slurp(bin_dir_ + "/nofp");
  auto [off, size] = section_of(elf, ".eh_frame");
  ASSERT_GT(size, 0u);
  const std::string cie_ra("\x90\x01", 2), undefined("\x07\x10", 2);
  size_t patched = 0;
  for (size_t at = elf.find(cie_ra, off);
       at != std::string::npos && at < off + size;
       at = elf.find(cie_ra, at + 2)) {
    elf.replace(at, 2, undefined);
    patched++;
  }
  ASSERT_GT(patched, 0u);
  std::string copy = user_file("nofp", elf);
  ASSERT_EQ(chmod(copy.c_str(), 0755), 0);
  // The user's process starts first: its file is seen first.
  Workload w = start({copy, bin_dir_ + "/libnofp_lib.so"});
  ASSERT_TRUE(w.ready()) << w.error();
  Measured m = trace(w, 2);
  expect_within(m, 2, kSmallRssKb, memlock_budget(),
                "same build id, poisoned CFI");
  // The poison works on its own process: the test can fail.
  bool cut = false;
  std::istringstream in(m.t.r.out);
  for (std::string line; std::getline(in, line);)
    if (line.find("-" + w.pid() + "/") != std::string::npos &&
        line.find("nf_sleep_inner") != std::string::npos &&
        line.find("nf_sleep_main") == std::string::npos)
      cut = true;
  EXPECT_TRUE(cut) << "the poisoned copy's own stacks were whole:\n"
                   << lines_with(m.t.r.out, "nf_sleep");
}

} // namespace
} // namespace offcpu::test
