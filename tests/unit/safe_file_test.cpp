// Confined opening of files other users control: each attack both through
// openat2 and through the walk used on kernels without it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "util/safe_file.h"

namespace offcpu {
namespace {

class SafeFile : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/offcpu-safe-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    // base/secret (outside), base/root/{tmp,etc} (the "container")
    write(base_ + "/secret", "SECRET\n");
    ASSERT_EQ(mkdir((base_ + "/root").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/root/tmp").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/root/etc").c_str(), 0755), 0);
    write(base_ + "/root/etc/inside", "INSIDE\n");
    root_ = open_root_dir(base_ + "/root");
    ASSERT_TRUE(root_);
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + base_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  static void write(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
  }
  CheckedFile open(const std::string &path, FilePolicy policy = {}) {
    return GetParam() ? open_in_root(root_.get(), path, policy)
                      : open_in_root_by_walk(root_.get(), path, policy);
  }
  std::string content(const CheckedFile &f) {
    return f ? read_fd(f.fd.get(), 1024).value_or("") : "";
  }
  std::string base_;
  UniqueFd root_;
};

TEST_P(SafeFile, OpensARegularFileInsideTheRoot) {
  auto f = open("/etc/inside");
  EXPECT_EQ(content(f), "INSIDE\n");
  EXPECT_EQ(f.failure, OpenFailure::None);
}

TEST_P(SafeFile, RefusesASymlinkAsLastComponent) {
  ASSERT_EQ(symlink("/etc/inside", (base_ + "/root/tmp/link").c_str()), 0);
  auto f = open("/tmp/link");
  EXPECT_FALSE(f);
  EXPECT_EQ(f.failure, OpenFailure::Symlink);
}

TEST_P(SafeFile, AbsoluteSymlinksResolveInsideTheRoot) {
  // The secret's real path means nothing inside the root.
  ASSERT_EQ(symlink((base_ + "/secret").c_str(),
                    (base_ + "/root/tmp/escape").c_str()),
            0);
  FilePolicy follow;
  follow.follow_last_symlink = true;
  auto f = open("/tmp/escape", follow);
  EXPECT_FALSE(f);
  EXPECT_EQ(content(f), "");
  // ... and a directory symlink to "/" is the root itself.
  ASSERT_EQ(symlink("/", (base_ + "/root/tmp/top").c_str()), 0);
  EXPECT_EQ(content(open("/tmp/top/etc/inside")), "INSIDE\n");
}

TEST_P(SafeFile, DotDotStopsAtTheRoot) {
  EXPECT_FALSE(open("/../secret"));
  EXPECT_FALSE(open("../../../../secret"));
  EXPECT_EQ(content(open("/../../etc/inside")), "INSIDE\n");
  ASSERT_EQ(symlink("../../..", (base_ + "/root/tmp/up").c_str()), 0);
  EXPECT_FALSE(open("/tmp/up/secret"));
}

TEST_P(SafeFile, NeverOpensFifosOrDevices) {
  ASSERT_EQ(mkfifo((base_ + "/root/tmp/fifo").c_str(), 0644), 0);
  auto fifo = open("/tmp/fifo"); // would block forever if opened to read
  EXPECT_EQ(fifo.failure, OpenFailure::NotRegular);
  EXPECT_EQ(open("/tmp").failure, OpenFailure::NotRegular);
  auto dev = open_checked("/dev/zero", FilePolicy{});
  EXPECT_EQ(dev.failure, OpenFailure::NotRegular);
}

TEST_P(SafeFile, OwnerPermissionAndSize) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to hand files to other users";
  std::string path = base_ + "/root/tmp/perf-1.map";
  write(path, "1000 10 name\n");
  ASSERT_EQ(chown(path.c_str(), 4242, 4242), 0);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  FilePolicy perf_map;
  perf_map.owner = 4242;
  perf_map.reader = Credentials{4242, 4242};
  EXPECT_TRUE(open("/tmp/perf-1.map", perf_map));
  perf_map.owner = 4343; // someone else's file
  EXPECT_EQ(open("/tmp/perf-1.map", perf_map).failure, OpenFailure::Owner);

  FilePolicy reader;
  reader.reader = Credentials{4343, 4343};
  EXPECT_EQ(open("/tmp/perf-1.map", reader).failure, OpenFailure::Permission);
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  EXPECT_TRUE(open("/tmp/perf-1.map", reader));

  FilePolicy small;
  small.max_size = 4;
  EXPECT_EQ(open("/tmp/perf-1.map", small).failure, OpenFailure::TooLarge);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, SafeFile, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &p) {
                           return p.param ? "openat2" : "walk";
                         });

TEST(ReadFd, ReadsWithoutMappingAndStopsAtTheLimit) {
  char tmpl[] = "/tmp/offcpu-readfd-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "0123456789", 10), 10);
  EXPECT_EQ(read_fd(fd, 4).value_or(""), "0123");
  EXPECT_EQ(read_fd(fd, 100).value_or(""), "0123456789");
  ASSERT_EQ(ftruncate(fd, 0), 0); // truncated under us: no signal, no data
  EXPECT_EQ(read_fd(fd, 100).value_or("x"), "");
  close(fd);
  unlink(tmpl);
}

} // namespace
} // namespace offcpu
