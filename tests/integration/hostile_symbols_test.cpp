// Issue #26, the symbolizer's side: ELF files, debug files and vDSO images
// that an unprivileged user controls. The files are written at test time
// by the ELF writer (support/elf_writer.h) and mapped by the hostile_elf
// workload, run as the test user. Each run must end on time, within a
// stated memory budget, exit 0, say what it lost on stderr, and name the
// frames of other users' processes (root's here) with their true names.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/elf_writer.h"
#include "support/folded_parse.h"
#include "support/hostile_fixture.h"
#include "support/process.h"

namespace offcpu {
namespace {

using test::ElfWriter;
using test::expect_clean_run;
using test::ok;
using test::run_offcpu;
using test::StringTable;
using test::Timed;
using test::Workload;

// Where the generated files put their code: .text at this address, at the
// same file offset, so a mapping of the whole file at M holds address A at
// M + A.
constexpr uint64_t kText = 0x1000;
// A function every generated file has, and where the workload's forged
// frame points: inside it.
constexpr uint64_t kFn = kText + 0x100;
constexpr uint64_t kFnSize = 0x10;
const char *const kFrameOffset = "1108";

struct SymbolFile {
  std::string fn_name = "true_name"; // the function at kFn
  const char *table = ".symtab";     // or ".dynsym"
  std::string build_id;
  std::string debuglink;
  // Extra symbols, each 1 byte, from kText + 0x1000 on, all named `filler`.
  size_t fillers = 0;
  std::string filler;
};

std::string elf_bytes(const SymbolFile &spec) {
  ElfWriter w;
  uint64_t text_size = 0x1000 + spec.fillers + 0x10;
  uint16_t t = w.add_text(kText, std::string(text_size, '\xcc'));
  // Offset 0 to the end of .text, at vaddr 0: addresses are file offsets.
  w.add_segment(
      {PT_LOAD, PF_R | PF_X, 0, 0, kText + text_size, kText + text_size});
  StringTable names;
  std::vector<test::ElfSymbol> syms;
  syms.push_back({names.add(spec.fn_name), kFn, kFnSize,
                  ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, t});
  if (spec.fillers) {
    uint32_t shared = names.add(spec.filler);
    for (size_t i = 0; i < spec.fillers; i++)
      syms.push_back({shared, kText + 0x1000 + i, 1,
                      ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, t});
  }
  std::string table = spec.table;
  w.add_symbols(table, table == ".dynsym" ? ".dynstr" : ".strtab", syms, names);
  if (!spec.build_id.empty())
    w.add_build_id(spec.build_id);
  if (!spec.debuglink.empty())
    w.add_debuglink(spec.debuglink, 0x12345678);
  return w.bytes();
}

bool write_elf(const std::string &path, const SymbolFile &spec) {
  std::string bytes = elf_bytes(spec);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0755);
  bool done = fd >= 0 && write(fd, bytes.data(), bytes.size()) ==
                             static_cast<ssize_t>(bytes.size());
  if (fd >= 0)
    close(fd);
  return done && chmod(path.c_str(), 0755) == 0;
}

// The folded lines of `comm`.
std::vector<test::FoldedLine> lines_of(const std::string &folded,
                                       const std::string &comm) {
  std::vector<test::FoldedLine> out;
  for (auto &l : test::parse_folded(folded))
    if (!l.frames.empty() && l.frames[0] == comm)
      out.push_back(l);
  return out;
}

// Whether some line of `comm` has the frame `name`.
bool has_frame(const std::string &folded, const std::string &comm,
               const std::string &name) {
  for (const auto &l : lines_of(folded, comm))
    if (test::frame_index(l, name) >= 0)
      return true;
  return false;
}

// Every frame of `comm`'s lines, joined (for failure messages).
std::string frames_of(const std::string &folded, const std::string &comm) {
  std::string out;
  for (const auto &l : lines_of(folded, comm)) {
    std::string text =
        l.text.size() > 300 ? l.text.substr(0, 300) + "..." : l.text;
    out += text + "\n";
  }
  return out.empty() ? "(no lines of " + comm + ")\n" : out;
}

class HostileSymbols : public test::HostileFiles {
protected:
  static void SetUpTestSuite() {
    HostileFiles::SetUpTestSuite();
    if (!skip_.empty())
      return;
    if (!ok(test::run({"/bin/cp", WORKLOAD_HOSTILE_ELF, hostile_elf()}, 30)) ||
        chmod(hostile_elf().c_str(), 0755) != 0)
      skip_ = "could not copy the workload to " + bin_dir_;
  }
  static std::string hostile_elf() { return bin_dir_ + "/hostile_elf"; }

  // The workload run as root: the victim whose frames must keep their
  // names.
  std::unique_ptr<test::Subprocess>
  start_root(const std::vector<std::string> &argv, std::string &pid) {
    auto p = std::make_unique<test::Subprocess>(argv);
    auto line = p->read_line(30);
    if (line && line->rfind("ready ", 0) == 0)
      pid = line->substr(6);
    return p;
  }
};

// 1. Symbols: one 4 KB name shared by 500,000 symbols (12 MB) cost 2.0 GB
// and 14 s when each symbol copied it.
TEST_F(HostileSymbols, HalfAMillionSymbolsSharingOneLongName) {
  std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  std::string file = scratch + "/many_symbols.so";
  SymbolFile spec;
  spec.fillers = 500000;
  spec.filler = std::string(4096, 'A');
  ASSERT_TRUE(write_elf(file, spec));
  ASSERT_EQ(chown(file.c_str(), uid_, gid_), 0);
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_GE(st.st_size, 12'000'000);

  Workload w =
      start({hostile_elf(), "map", "manysyms", "0", kFrameOffset, file});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2, "500,000 symbols sharing one 4 KB name");
  std::cerr << "[ info ] offcpu peak RSS with 500,000 symbols of one 4 KB "
               "name: "
            << t.r.max_rss_kb / 1024 << " MB, " << t.seconds << " s\n";
  EXPECT_LT(t.r.max_rss_kb, 150 * 1024)
      << "offcpu peaked at " << t.r.max_rss_kb / 1024 << " MB";
  // The function read first keeps its name; the rest of the table is past
  // the per-file budget of name bytes, and the stderr says so.
  EXPECT_TRUE(has_frame(t.r.out, "manysyms", "true_name"))
      << frames_of(t.r.out, "manysyms");
  // Every other file keeps its names: the workload's own, libc's.
  EXPECT_TRUE(has_frame(t.r.out, "manysyms", "block_with_forged_frames") &&
              has_frame(t.r.out, "manysyms", "__libc_start_main"))
      << frames_of(t.r.out, "manysyms");
  EXPECT_NE(t.r.err.find("files read in part"), std::string::npos) << t.r.err;
  EXPECT_NE(t.r.err.find("128 MiB of symbol names"), std::string::npos)
      << t.r.err;
}

// 2. Debug files: ten small binaries, each with a .gnu_debuglink to a 4 GiB
// sparse file (the unwinder took 2 s of CRC for each: 20.5 s for a 2 s
// run). The symbolizer checks the size against the binary's first.
class HostileDebuglinks : public HostileSymbols {
protected:
  void run_with(const std::vector<std::string> &extra) {
    std::string scratch = user_scratch_dir();
    ASSERT_FALSE(scratch.empty());
    std::string big = scratch + "/huge.debug";
    int fd = open(big.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, off_t{4} << 30), 0) << strerror(errno);
    close(fd);
    ASSERT_EQ(chown(big.c_str(), uid_, gid_), 0);
    std::vector<std::string> argv{hostile_elf(), "map", "debuglinks", "0",
                                  kFrameOffset};
    for (int i = 0; i < 10; i++) {
      std::string file = scratch + "/stripped" + std::to_string(i) + ".so";
      SymbolFile spec;
      spec.fn_name = "dyn_fn";
      spec.table = ".dynsym"; // stripped: debug files are looked for
      spec.debuglink = "huge.debug";
      ASSERT_TRUE(write_elf(file, spec));
      ASSERT_EQ(chown(file.c_str(), uid_, gid_), 0);
      argv.push_back(file);
    }
    Workload w = start(argv);
    ASSERT_TRUE(w.ready()) << w.error();
    std::vector<std::string> args = extra;
    for (const char *a : {"-p", "", "-f", "2"})
      args.push_back(*a ? a : w.pid());
    Timed t = run_offcpu(args, 2);
    expect_clean_run(t, 2, "ten debuglinks to a 4 GiB sparse file");
    EXPECT_TRUE(has_frame(t.r.out, "debuglinks", "dyn_fn"))
        << "the binaries' own symbols no longer name their frames\n"
        << frames_of(t.r.out, "debuglinks");
    EXPECT_NE(t.r.err.find("10 debug files skipped"), std::string::npos)
        << t.r.err;
  }
};

// The symbolizer's paths alone (frame pointers: no unwind tables built).
TEST_F(HostileDebuglinks, SymbolizerSkipsThemAtOnce) {
  run_with({"--user-unwind", "fp"});
}

// The whole run, unwind tables included (their debug-file lookup is the
// unwinder's, src/unwind/).
TEST_F(HostileDebuglinks, WholeRunEndsOnTime) {
  run_with({});
}

// 3. Trust: a copy of root's binary with the same build id and other
// symbols, run by the user at the same time, names only its own frames.
TEST_F(HostileSymbols, SameBuildIdCopyDoesNotRenameRootsFrames) {
  const std::string id = "\x26\x26\x26\x26\x26\x26\x26\x26\x26\x26"
                         "\x26\x26\x26\x26\x26\x26\x26\x26\x26\x26";
  std::string original = dir_ + "/original.so";
  SymbolFile root_spec;
  root_spec.build_id = id;
  ASSERT_TRUE(write_elf(original, root_spec));

  std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  std::string copy = scratch + "/copy.so";
  SymbolFile user_spec;
  user_spec.build_id = id;
  user_spec.fn_name = "forged_name";
  ASSERT_TRUE(write_elf(copy, user_spec));
  ASSERT_EQ(chown(copy.c_str(), uid_, gid_), 0);

  // The user's copy is mapped first, root's a second later.
  Workload attacker =
      start({hostile_elf(), "map", "attacker", "0", kFrameOffset, copy});
  ASSERT_TRUE(attacker.ready()) << attacker.error();
  std::string victim_pid;
  auto victim = start_root(
      {hostile_elf(), "map", "victim", "1000", kFrameOffset, original},
      victim_pid);
  ASSERT_FALSE(victim_pid.empty());
  Timed t = run_offcpu({"-p", attacker.pid() + "," + victim_pid, "-f", "3"}, 3);
  expect_clean_run(t, 3, "a same-build-id copy");
  EXPECT_TRUE(has_frame(t.r.out, "victim", "true_name"))
      << frames_of(t.r.out, "victim");
  EXPECT_FALSE(has_frame(t.r.out, "victim", "forged_name"))
      << "the user's copy renamed root's frames:\n"
      << frames_of(t.r.out, "victim");
  EXPECT_TRUE(has_frame(t.r.out, "attacker", "forged_name"))
      << "the copy's own frames are not named from it: the test proves "
         "nothing\n"
      << frames_of(t.r.out, "attacker");
}

// The same, through a debug file: the user maps root's stripped binary
// (the same file: one entry per device and inode) from a private mount
// namespace whose /usr/lib/debug holds a debug file for its build id:
// one of the user's own, or a root-owned ELF without a build id.
class HostileDebugNamespace : public HostileSymbols {
protected:
  // `debug`: what the workload puts at the build id's path ("bind:PATH"
  // to mount a file as it is).
  void attack(const std::string &debug, const std::string &forged_name,
              const std::string &expected_loss) {
    if (access("/usr/bin/unshare", X_OK) != 0 ||
        !ok(run_as_user({"/usr/bin/unshare", "-Urm", "/bin/true"})))
      GTEST_SKIP() << "unprivileged user namespaces are not available";
    const std::string id = "\x62\x62\x62\x62\x62\x62\x62\x62\x62\x62"
                           "\x62\x62\x62\x62\x62\x62\x62\x62\x62\x62";
    std::string original = dir_ + "/stripped.so";
    SymbolFile root_spec;
    root_spec.table = ".dynsym";
    root_spec.build_id = id;
    ASSERT_TRUE(write_elf(original, root_spec));
    std::string hex;
    for (unsigned char c : id) {
      char b[3];
      snprintf(b, sizeof(b), "%02x", c);
      hex += b;
    }
    Workload attacker =
        start({"/usr/bin/unshare", "-Urm", hostile_elf(), "nsmap", debug, hex,
               "attacker", "0", kFrameOffset, original});
    ASSERT_TRUE(attacker.ready()) << attacker.error();
    std::string victim_pid;
    auto victim = start_root(
        {hostile_elf(), "map", "victim", "1000", kFrameOffset, original},
        victim_pid);
    ASSERT_FALSE(victim_pid.empty());
    Timed t =
        run_offcpu({"-p", attacker.pid() + "," + victim_pid, "-f", "3"}, 3);
    expect_clean_run(t, 3, "a debug file in the user's namespace");
    EXPECT_TRUE(has_frame(t.r.out, "victim", "true_name"))
        << frames_of(t.r.out, "victim");
    EXPECT_FALSE(has_frame(t.r.out, "victim", forged_name))
        << "the user's debug file renamed root's frames:\n"
        << frames_of(t.r.out, "victim");
    if (!expected_loss.empty()) {
      EXPECT_NE(t.r.err.find(expected_loss), std::string::npos) << t.r.err;
    }
  }
};

TEST_F(HostileDebugNamespace, UsersOwnDebugFileIsNotTrusted) {
  std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  std::string forged = scratch + "/forged.debug";
  SymbolFile debug_spec;
  debug_spec.build_id = std::string(20, '\x62');
  debug_spec.fn_name = "forged_debug_name";
  ASSERT_TRUE(write_elf(forged, debug_spec));
  ASSERT_EQ(chown(forged.c_str(), uid_, gid_), 0);
  attack(forged, "forged_debug_name", "debug files not used");
}

TEST_F(HostileDebugNamespace, RootOwnedFileWithoutTheBuildIdIsNotUsed) {
  // Root's, readable by all, but the debug file of nothing.
  std::string other = dir_ + "/other.so";
  SymbolFile other_spec;
  other_spec.fn_name = "root_owned_other";
  ASSERT_TRUE(write_elf(other, other_spec));
  attack("bind:" + other, "root_owned_other", "");
}

// 4. The vDSO: a process that rewrites its own (through /proc/self/mem)
// names its own frames only.
TEST_F(HostileSymbols, RewrittenVdsoDoesNotRenameOtherProcesses) {
  Workload attacker = start({hostile_elf(), "vdso", "pwn", "rewrite"});
  ASSERT_TRUE(attacker.ready()) << attacker.error();
  std::string victim_pid;
  auto victim = start_root({hostile_elf(), "vdso", "victim"}, victim_pid);
  ASSERT_FALSE(victim_pid.empty());
  Timed t = run_offcpu({"-p", attacker.pid() + "," + victim_pid, "-f", "2"}, 2);
  expect_clean_run(t, 2, "a rewritten vDSO");
  EXPECT_TRUE(has_frame(t.r.out, "victim", "clock_gettime") ||
              has_frame(t.r.out, "victim", "__vdso_clock_gettime"))
      << frames_of(t.r.out, "victim");
  EXPECT_EQ(frames_of(t.r.out, "victim").find("PWNED"), std::string::npos)
      << "another process's vDSO renamed root's frames:\n"
      << frames_of(t.r.out, "victim");
  EXPECT_NE(frames_of(t.r.out, "pwn").find("PWNED_gettime"), std::string::npos)
      << "the rewritten vDSO does not name its own process's frames: the "
         "test proves nothing\n"
      << frames_of(t.r.out, "pwn");
}

} // namespace
} // namespace offcpu
