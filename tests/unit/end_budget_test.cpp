// The shared debug-file limits (util/debug_file.h) and the module keys of
// the model (two files at one path keep their own build ids).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "model/profile.h"
#include "support/elf_writer.h"
#include "util/clock.h"
#include "util/debug_file.h"

namespace offcpu {
namespace {

// A temporary file holding `bytes`, then `holes` bytes of holes.
class TempFile {
public:
  TempFile(const std::string &bytes, off_t holes = 0) {
    char tmpl[] = "/tmp/offcpu-debug-file-XXXXXX";
    fd_ = mkstemp(tmpl);
    path_ = tmpl;
    EXPECT_EQ(write(fd_, bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
    if (holes) {
      EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(bytes.size()) + holes), 0);
    }
  }
  ~TempFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }

private:
  int fd_ = -1;
  std::string path_;
};

TEST(DebugFileLimits, ScaleWithTheBinaryBetweenFloorAndCeiling) {
  EXPECT_EQ(max_debug_file_bytes(0), kDebugFileFloor);
  EXPECT_EQ(max_debug_file_bytes(1 << 20), kDebugFileFloor);
  EXPECT_EQ(max_debug_file_bytes(uint64_t{10} << 20), uint64_t{10} << 20 << 5);
  EXPECT_EQ(max_debug_file_bytes(uint64_t{1} << 40), kDebugFileCeiling);
  // No overflow for a size a hostile file claims.
  EXPECT_EQ(max_debug_file_bytes(UINT64_MAX), kDebugFileCeiling);
  EXPECT_EQ(debug_file_size_rule(),
            "over 32 times its binary's size and 64 MiB");
}

TEST(CrcBudget, MatchesTheDebuglinkCrc) {
  std::string bytes(300000, 'x');
  bytes += "some debug file";
  TempFile f(bytes);
  CrcBudget budget;
  CrcOutcome out = budget.crc(f.fd(), bytes.size());
  ASSERT_TRUE(out.crc);
  EXPECT_EQ(*out.crc, test::gnu_debuglink_crc(bytes));
  EXPECT_EQ(budget.crc(f.fd(), bytes.size() - 1).stop, CrcStop::Unreadable);
}

TEST(CrcBudget, StopsAtTheFilesShareThenTheRunsThenTheDeadline) {
  TempFile big("", off_t{8} << 30); // 8 GiB of holes: seconds of CRC
  const uint64_t t0 = monotonic_ns();
  CrcBudget per_file(50000000, 1000000000); // 50 ms a file, 1 s a run
  EXPECT_EQ(per_file.crc(big.fd(), UINT64_MAX).stop, CrcStop::FileTime);
  EXPECT_GT(per_file.left_ns(), 0u);
  CrcBudget per_run(1000000000, 60000000); // the run's 60 ms end it first
  EXPECT_EQ(per_run.crc(big.fd(), UINT64_MAX).stop, CrcStop::RunTime);
  EXPECT_EQ(per_run.left_ns(), 0u);
  EXPECT_EQ(per_run.crc(big.fd(), UINT64_MAX).stop, CrcStop::RunTime);
  EXPECT_LT(monotonic_ns() - t0, 900000000u); // each stopped within 4 MiB
  CrcBudget fresh;
  EXPECT_EQ(fresh.crc(big.fd(), UINT64_MAX, monotonic_ns()).stop,
            CrcStop::Deadline);
  EXPECT_EQ(fresh.crc(big.fd(), UINT64_MAX, 0, [] { return true; }).stop,
            CrcStop::Stopped);
}

TEST(ModuleKeys, TwoFilesAtOnePathKeepTheirBuildIds) {
  Profile p;
  uint32_t a = p.module("/app/bin/server", "aaaa");
  uint32_t b = p.module("/app/bin/server", "bbbb");
  EXPECT_NE(a, b);
  EXPECT_EQ(p.modules[a].build_id, "aaaa");
  EXPECT_EQ(p.modules[b].build_id, "bbbb");
  EXPECT_EQ(p.module("/app/bin/server", "aaaa"), a);
  // One file: one module, its debug file filled in once known.
  EXPECT_EQ(p.module("/app/bin/server", "bbbb", "/dbg/bb.debug"), b);
  EXPECT_EQ(p.modules[b].debug_file, "/dbg/bb.debug");
  // Appended (a later interval): still two, each with its id.
  Profile q;
  q.append(p);
  ASSERT_EQ(q.modules.size(), 2u);
  EXPECT_EQ(q.modules[0].build_id, "aaaa");
  EXPECT_EQ(q.modules[1].build_id, "bbbb");
}

} // namespace
} // namespace offcpu
