// Issue #26, the end of the run: after the window closes offcpu names the
// stacks it took, reading the files they ran in that it has not read yet.
// An unprivileged user's process that maps many costly files (each within
// its own per-file budgets) must not push the end past the window by more
// than a second, nor a SIGTERM's end past a second after the signal; the
// files left unread are counted on stderr. The unwinder's CRCs of debug
// files have a budget for the whole run, as the symbolizer's do.
//
// The files are written at test time (support/elf_writer.h) and mapped by
// the hostile_elf workload, run as the test user.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>
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

// As in hostile_symbols_test.cpp: .text at 0x1000 (same file offset), the
// function the forged frame points into at 0x1100.
constexpr uint64_t kText = 0x1000;
constexpr uint64_t kFn = kText + 0x100;
const char *const kFrameOffset = "1108";
constexpr int kFiles = 24;
// Debug files: 4 GiB of holes, allowed for binaries of 128 MiB and more
// (util/debug_file.h), so each costs its whole second of CRC.
constexpr off_t kDebugBytes = off_t{4} << 30;
constexpr uint64_t kBinaryBytes = uint64_t{128} << 20;
// A .symtab and its .strtab of this many bytes of holes: read whole by
// libelf, no function symbol in them, under the 128 MiB cap.
constexpr uint64_t kTableBytes = uint64_t{100} << 20;

// Points section `index`'s header at [offset, offset + size) of `elf`.
void retarget_section(std::string &elf, uint16_t index, uint64_t offset,
                      uint64_t size) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  Elf64_Shdr sh;
  const size_t at = eh.e_shoff + size_t{index} * sizeof(Elf64_Shdr);
  std::memcpy(&sh, elf.data() + at, sizeof(sh));
  sh.sh_offset = offset;
  sh.sh_size = size;
  std::memcpy(elf.data() + at, &sh, sizeof(sh));
}

// A stripped binary (its one name in .dynsym) with a .gnu_debuglink to
// "huge.debug" beside it and no .eh_frame (its CFI would be in the debug
// file), at least kBinaryBytes long (holes past its bytes). `big_tables`:
// also a .symtab and a .strtab of kTableBytes each, in those holes.
bool write_costly_binary(const std::string &path, bool big_tables) {
  ElfWriter w;
  uint64_t text_size = 0x1000;
  uint16_t t = w.add_text(kText, std::string(text_size, '\xcc'));
  w.add_segment(
      {PT_LOAD, PF_R | PF_X, 0, 0, kText + text_size, kText + text_size});
  StringTable names;
  std::vector<test::ElfSymbol> syms;
  syms.push_back({names.add("dyn_fn"), kFn, 0x10,
                  ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), STV_DEFAULT, t});
  w.add_symbols(".dynsym", ".dynstr", syms, names);
  w.add_debuglink("huge.debug", 0x12345678);
  uint16_t symtab = 0, strtab = 0;
  if (big_tables) {
    // Laid out small here, pointed at the holes below.
    test::ElfSection str;
    str.name = ".strtab";
    str.type = SHT_STRTAB;
    str.content = std::string(1, '\0');
    strtab = w.add_section(str);
    test::ElfSection sym;
    sym.name = ".symtab";
    sym.type = SHT_SYMTAB;
    sym.entsize = sizeof(Elf64_Sym);
    sym.align = 8;
    sym.link = strtab;
    sym.content = std::string(sizeof(Elf64_Sym), '\0');
    symtab = w.add_section(sym);
  }
  std::string bytes = w.bytes();
  const uint64_t tables = uint64_t{1} << 20; // past every byte written
  if (bytes.size() > tables)
    return false;
  uint64_t size = kBinaryBytes;
  if (big_tables) {
    retarget_section(bytes, symtab, tables, kTableBytes);
    retarget_section(bytes, strtab, tables + kTableBytes, kTableBytes);
    size = std::max<uint64_t>(size, tables + 2 * kTableBytes);
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0755);
  bool done = fd >= 0 && write(fd, bytes.data(), bytes.size()) ==
                             static_cast<ssize_t>(bytes.size());
  done = done && ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0)
    close(fd);
  return done && chmod(path.c_str(), 0755) == 0;
}

bool has_frame(const std::string &folded, const std::string &comm,
               const std::string &name) {
  for (const auto &l : test::parse_folded(folded))
    if (!l.frames.empty() && l.frames[0] == comm &&
        test::frame_index(l, name) >= 0)
      return true;
  return false;
}

class HostileEnd : public test::HostileFiles {
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

  // The workload's argv: it maps kFiles costly binaries after `delay_ms`,
  // one thread blocked in each.
  std::vector<std::string> costly_files(const std::string &comm,
                                        const std::string &delay_ms,
                                        bool big_tables) {
    std::string scratch = user_scratch_dir();
    EXPECT_FALSE(scratch.empty());
    std::string debug = scratch + "/huge.debug";
    int fd = open(debug.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    EXPECT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(ftruncate(fd, kDebugBytes), 0) << strerror(errno);
    close(fd);
    EXPECT_EQ(chown(debug.c_str(), uid_, gid_), 0);
    std::vector<std::string> argv{hostile_elf(), "map", comm, delay_ms,
                                  kFrameOffset};
    for (int i = 0; i < kFiles; i++) {
      std::string file = scratch + "/costly" + std::to_string(i) + ".so";
      EXPECT_TRUE(write_costly_binary(file, big_tables)) << file;
      EXPECT_EQ(chown(file.c_str(), uid_, gid_), 0);
      argv.push_back(file);
    }
    return argv;
  }
};

// 24 files, mapped late in the window so that most are named after it:
// each costs its CRC second (2 s for the run) and its 200 MB of tables.
// Before the end had a deadline, the run ended seconds after the window.
TEST_F(HostileEnd, NamingEndsWithinASecondOfTheWindow) {
  Workload w = start(costly_files("costly", "1200", true));
  ASSERT_TRUE(w.ready()) << w.error();
  // Frame pointers: the walk goes through the forged frames into the files
  // (unwind tables would step over them to the real caller).
  // -v: the second is counted from the window's end (expect_clean_run).
  Timed t =
      run_offcpu({"-v", "--user-unwind", "fp", "-p", w.pid(), "-f", "2"}, 2);
  std::cerr << "[ info ] offcpu with " << kFiles
            << " costly files: " << t.seconds
            << " s for a 2 s window, peak RSS " << t.r.max_rss_kb / 1024
            << " MB\n";
  expect_clean_run(t, 2, "24 costly files to name after the window");
  // Complete: every line parses, and the process's own code is named.
  auto lines = test::parse_folded(t.r.out);
  EXPECT_FALSE(lines.empty()) << t.r.err;
  EXPECT_TRUE(has_frame(t.r.out, "costly", "block_with_forged_frames"))
      << t.r.out.substr(0, 2000);
  EXPECT_NE(t.r.err.find("files not read or read in part: the end of the "
                         "run allows 0.5 s for naming"),
            std::string::npos)
      << t.r.err << test::lines_with(t.r.out, "costly").substr(0, 3000);
  EXPECT_NE(t.r.err.find("--name-time"), std::string::npos) << t.r.err;
}

// The same, ended by SIGTERM while the files are being read: out within a
// second of the signal, the output whole.
TEST_F(HostileEnd, SigtermEndsWithinASecond) {
  Workload w = start(costly_files("costly", "1000", true));
  ASSERT_TRUE(w.ready()) << w.error();
  test::Subprocess offcpu(
      {OFFCPU_BIN, "--user-unwind", "fp", "-p", w.pid(), "-f"});
  test::sleep_seconds(2.0); // attached, the files mapped and being read
  const double signal_s = test::now_seconds();
  offcpu.signal(SIGTERM);
  test::RunResult r = offcpu.wait(10);
  const double took = test::now_seconds() - signal_s;
  std::cerr << "[ info ] offcpu ended " << took << " s after SIGTERM\n";
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(took, 1.0) << "ended " << took << " s after SIGTERM\n" << r.err;
  auto lines = test::parse_folded(r.out);
  ASSERT_FALSE(lines.empty()) << r.err;
  EXPECT_TRUE(has_frame(r.out, "costly", "block_with_forged_frames"))
      << r.out.substr(0, 2000);
}

// The unwinder's side: 24 binaries without .eh_frame, each with a
// debuglink to a 4 GiB file of holes (the size their 128 MiB allows). Each
// CRC may take its file's second; all of them together 2 s, after which
// the rest are not checked (counted) and the tables of the processes asked
// for at start are ready. Before, 24 s of CRC held them past the window.
TEST_F(HostileEnd, UnwinderCrcTimeHasARunBudget) {
  Workload w = start(costly_files("crcs", "0", false));
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "-v", "6"}, 6);
  expect_clean_run(t, 6, "24 debuglinks to 4 GiB files");
  EXPECT_NE(t.r.err.find("debug files not checked: the run's 2000 ms of "
                         "debug-file CRCs were spent"),
            std::string::npos)
      << t.r.err;
  std::smatch m;
  const std::regex ready("unwind tables of the processes asked for at start "
                         "ready ([0-9]+) ms after the attach");
  ASSERT_TRUE(std::regex_search(t.r.err, m, ready))
      << "the tables were not ready within the window\n"
      << t.r.err;
  EXPECT_LE(std::stoi(m[1].str()), 5000) << t.r.err;
  EXPECT_TRUE(test::has_comm(t.r.out, "crcs")) << t.r.out.substr(0, 2000);
}

} // namespace
} // namespace offcpu
