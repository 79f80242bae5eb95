// The -o path walk's own rules, beside the attacks in
// tests/integration/output_safety_test.cpp: where root's links lead, loops,
// "..", paths that cannot name a file. Needs root (only root's links are
// followed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "util/error.h"
#include "util/output_path.h"

namespace offcpu {
namespace {

class OutputPath : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "only root's links are followed: run as root";
    char tmpl[] = "/tmp/offcpu-outpath-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl; // root's, 0700
    ASSERT_EQ(mkdir((base_ + "/a").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/a/b").c_str(), 0755), 0);
    std::ofstream(base_ + "/a/b/file") << "x";
  }
  void TearDown() override {
    if (!base_.empty())
      std::system(("rm -rf '" + base_ + "'").c_str());
  }
  // The error resolve_output_path throws, "" if it resolves.
  static std::string error_of(const std::string &path) {
    try {
      resolve_output_path(path);
    } catch (const FatalError &e) {
      return e.what();
    }
    return "";
  }
  // The directory and name a path resolves to, as "dir-inode/name".
  static std::string where(const std::string &path) {
    ResolvedOutput r = resolve_output_path(path);
    struct stat st {};
    if (!r.dir || fstat(r.dir.get(), &st) != 0)
      return "in place";
    return std::to_string(st.st_ino) + "/" + r.name;
  }
  static std::string inode_of(const std::string &dir) {
    struct stat st {};
    return stat(dir.c_str(), &st) == 0 ? std::to_string(st.st_ino) : "?";
  }
  std::string base_;
};

TEST_F(OutputPath, RootLinksAreFollowedRelativeToTheirDirectory) {
  ASSERT_EQ(symlink("b/file", (base_ + "/a/rel").c_str()), 0);
  ASSERT_EQ(symlink("../a/b", (base_ + "/a/up").c_str()), 0);
  ASSERT_EQ(symlink((base_ + "/a/b").c_str(), (base_ + "/abs").c_str()), 0);
  const std::string b = inode_of(base_ + "/a/b");
  EXPECT_EQ(where(base_ + "/a/rel"), b + "/file");
  EXPECT_EQ(where(base_ + "/a/up/new.svg"), b + "/new.svg");
  EXPECT_EQ(where(base_ + "/abs/new.svg"), b + "/new.svg");
  EXPECT_EQ(where(base_ + "/a/b/../b/./file"), b + "/file");
}

TEST_F(OutputPath, LoopsAndDeadEndsAreErrorsNamingThePlace) {
  ASSERT_EQ(symlink("loop2", (base_ + "/loop1").c_str()), 0);
  ASSERT_EQ(symlink("loop1", (base_ + "/loop2").c_str()), 0);
  EXPECT_NE(error_of(base_ + "/loop1").find("Too many levels of symbolic"),
            std::string::npos);
  EXPECT_NE(error_of(base_ + "/a/b/file/x").find("Not a directory"),
            std::string::npos);
  EXPECT_NE(error_of(base_ + "/nodir/x.svg")
                .find(base_ + "/nodir: No such file or directory"),
            std::string::npos)
      << error_of(base_ + "/nodir/x.svg");
  EXPECT_NE(error_of(base_ + "/a/").find("cannot end in '/'"),
            std::string::npos);
  EXPECT_NE(error_of(base_ + "/a").find("is a directory"), std::string::npos);
  EXPECT_NE(error_of(base_ + "/a/..").find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_of("").find("no file name"), std::string::npos);
}

// Group-writable is others' too, even for group root: under a POSIX ACL
// the group bits are the mask of every user the ACL lets write.
TEST_F(OutputPath, GroupWritableDirectoryIsNotRootsAlone) {
  ASSERT_EQ(symlink("b/file", (base_ + "/a/rel").c_str()), 0);
  EXPECT_EQ(error_of(base_ + "/a/rel"), "");
  ASSERT_EQ(chmod((base_ + "/a").c_str(), 0775), 0);
  EXPECT_NE(error_of(base_ + "/a/rel").find("other users can write"),
            std::string::npos)
      << error_of(base_ + "/a/rel");
}

TEST_F(OutputPath, OwnDescriptorsAreWrittenInPlace) {
  EXPECT_TRUE(resolve_output_path("/dev/null").in_place);
  auto writable = [](int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
  };
  if (writable(1) && writable(2)) { // not so under every test runner
    for (const char *p : {"/dev/stdout", "/dev/stderr", "/proc/self/fd/2",
                          "/dev/fd/1", "/proc/thread-self/fd/1"})
      EXPECT_TRUE(resolve_output_path(p).in_place) << p;
  }
  // Other magic links in /proc are not followed by their text.
  EXPECT_NE(error_of("/proc/self/cwd/x").find("a link in /proc"),
            std::string::npos)
      << error_of("/proc/self/cwd/x");
}

} // namespace
} // namespace offcpu
