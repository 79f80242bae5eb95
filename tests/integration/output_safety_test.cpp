// -o as another user would like it to go (issue #26, item 7): a symlink a
// user made, or one in a directory a user can write, never leads root's
// report into a disk or over a root file; block devices and other drivers
// are never written; what root typed itself (/dev/stdout, /dev/null, a plain
// file, root's own link) keeps working. And `offcpu flamegraph` says why it
// cannot read its input. Each attack is set up by the unprivileged test
// user; the targets are a loop device over a scratch file and a root-owned
// stand-in for /etc, compared byte for byte afterwards.
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <random>

#include "support/hostile_fixture.h"

namespace offcpu {
namespace {

using test::HostileFiles;
using test::run_offcpu;
using test::slurp;
using test::Timed;

std::string random_bytes(size_t n) {
  std::mt19937_64 rng(std::random_device{}());
  std::string s(n, '\0');
  for (char &c : s)
    c = static_cast<char>(rng());
  return s;
}

bool write_file(const std::string &path, const std::string &data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return false;
  bool ok =
      write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return close(fd) == 0 && ok;
}

// The first `n` bytes of a block device, read as root through its cache
// (a write that has not reached the backing file yet shows here).
std::string read_device(const std::string &dev, size_t n) {
  int fd = open(dev.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "";
  std::string s(n, '\0');
  ssize_t got = pread(fd, s.data(), n, 0);
  close(fd);
  s.resize(got < 0 ? 0 : static_cast<size_t>(got));
  return s;
}

// A loop device over a scratch file of random bytes: a disk that can be
// "corrupted" harmlessly. Detached (and compared) by the test.
class LoopDevice {
public:
  static constexpr size_t kSize = 4 << 20; // room for a whole report

  explicit LoopDevice(const std::string &dir) {
    backing_ = dir + "/disk.img";
    content_ = random_bytes(kSize);
    if (!write_file(backing_, content_, 0600)) {
      error_ = "cannot write " + backing_;
      return;
    }
    auto r = test::run({"/usr/sbin/losetup", "-f", "--show", backing_}, 30);
    if (r.exit_code != 0 || r.out.empty()) {
      error_ = "losetup failed: " + r.err;
      return;
    }
    dev_ = r.out.substr(0, r.out.find('\n'));
    struct stat st {};
    if (stat(dev_.c_str(), &st) != 0 || !S_ISBLK(st.st_mode))
      error_ = dev_ + " is not a block device";
    rdev_ = st.st_rdev;
  }
  ~LoopDevice() { detach(); }

  const std::string &error() const { return error_; }
  const std::string &path() const { return dev_; }
  dev_t rdev() const { return rdev_; }

  // The device and, once detached (everything flushed), its backing file
  // hold exactly the bytes they were made with.
  void expect_untouched(const std::string &what) {
    EXPECT_TRUE(read_device(dev_, kSize) == content_)
        << what << ": the block device " << dev_ << " was written";
    detach();
    EXPECT_TRUE(slurp(backing_) == content_)
        << what << ": the loop device's backing file changed";
  }

private:
  void detach() {
    if (!dev_.empty())
      test::run({"/usr/sbin/losetup", "-d", dev_}, 30);
    dev_.clear();
  }

  std::string backing_, content_, dev_, error_;
  dev_t rdev_ = 0;
};

class OutputSafety : public HostileFiles {
protected:
  // A directory like /tmp: root's, mode 1777.
  std::string shared_dir() {
    std::string d = dir_ + "/shared";
    EXPECT_EQ(mkdir(d.c_str(), 0755), 0);
    EXPECT_EQ(chmod(d.c_str(), 01777), 0);
    return d;
  }

  // A stand-in for /etc: a root-only directory with a file that root's
  // report must never replace.
  std::string fake_etc() {
    std::string d = dir_ + "/etc";
    EXPECT_EQ(mkdir(d.c_str(), 0755), 0);
    passwd_ = "root:x:0:0:root:/root:/bin/bash\n" + random_bytes(64);
    EXPECT_TRUE(write_file(d + "/passwd", passwd_, 0644));
    struct stat st {};
    EXPECT_EQ(stat((d + "/passwd").c_str(), &st), 0);
    passwd_ino_ = st.st_ino;
    return d;
  }

  void expect_etc_untouched(const std::string &etc, const std::string &what) {
    struct stat st {};
    ASSERT_EQ(lstat((etc + "/passwd").c_str(), &st), 0) << what;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << what;
    EXPECT_EQ(st.st_ino, passwd_ino_)
        << what << ": the root file was replaced (renamed over)";
    EXPECT_TRUE(slurp(etc + "/passwd") == passwd_)
        << what << ": the root file's content changed";
    glob_t g{};
    EXPECT_NE(glob((etc + "/*.offcpu-*").c_str(), 0, nullptr, &g), 0)
        << what << ": a temporary file was created in the root directory: "
        << g.gl_pathv[0];
    globfree(&g);
  }

  void as_user_ok(const std::vector<std::string> &argv) {
    auto r = run_as_user(argv);
    ASSERT_EQ(r.exit_code, 0)
        << "as the test user: " << argv[0] << " "
        << (argv.size() > 1 ? argv[1] : "") << ": " << r.err;
  }

  // Refused before tracing: at once, non-zero, one line naming the path
  // and `reason`.
  void expect_refused(const std::vector<std::string> &extra,
                      const std::string &target, const std::string &reason) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"-f", "-o", target, "1"});
    Timed t = run_offcpu(args, 1);
    const std::string what = "-o " + target;
    ASSERT_FALSE(t.r.timed_out) << what << ": hung";
    EXPECT_NE(t.r.exit_code, 0) << what << ": accepted\n" << t.r.err;
    EXPECT_LT(t.seconds, 2.0) << what << ": took " << t.seconds << " s";
    EXPECT_EQ(t.r.err.find("Tracing"), std::string::npos)
        << what << ": refused only after tracing:\n"
        << t.r.err;
    EXPECT_NE(t.r.err.find("offcpu: cannot write " + target + ": "),
              std::string::npos)
        << what << ": " << t.r.err;
    EXPECT_NE(t.r.err.find(reason), std::string::npos)
        << what << ": expected '" << reason << "' in:\n"
        << t.r.err;
    EXPECT_EQ(std::count(t.r.err.begin(), t.r.err.end(), '\n'), 1)
        << what << ": not one line:\n"
        << t.r.err;
    EXPECT_EQ(t.r.out, "") << what;
  }

  // How the refusal names the test user as a link's owner.
  static std::string owned_by_user() {
    return std::string(test::kUser) + " (uid " + std::to_string(uid_) + ")";
  }

  // Accepted and finished (its timing is other tests' business: this
  // machine may be loaded).
  static void expect_written(const Timed &t, const std::string &what) {
    EXPECT_FALSE(t.r.timed_out) << what << ": hung";
    EXPECT_EQ(t.r.exit_code, 0) << what << ": " << t.r.err;
  }

  std::string passwd_;
  ino_t passwd_ino_ = 0;
};

// The reported attack: a name in a shared directory (like /tmp) or in a
// user's own directory that root writes into, linked by the user to a
// disk. Root's report went into the block device.
TEST_F(OutputSafety, UserLinkToBlockDeviceIsRefused) {
  LoopDevice disk(dir_);
  if (!disk.error().empty())
    GTEST_SKIP() << "no loop device: " << disk.error();
  std::string shared = shared_dir();
  std::string mine = user_scratch_dir();
  ASSERT_NE(mine, "");
  for (const std::string &d : {shared, mine}) {
    std::string link = d + "/report.folded";
    as_user_ok({"/bin/ln", "-s", disk.path(), link});
    expect_refused({}, link,
                   link + " is a symlink to " + disk.path() + " owned by " +
                       owned_by_user());
    struct stat st {};
    EXPECT_EQ(lstat(link.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << link << " was replaced";
  }
  disk.expect_untouched("a user's link to a loop device");
}

// A symlinked directory: the user's link "conf" -> a root directory
// standing in for /etc, and root's -o conf/passwd replaced /etc/passwd.
TEST_F(OutputSafety, UserLinkedDirectoryCannotReplaceRootFile) {
  std::string etc = fake_etc();
  std::string shared = shared_dir();
  std::string mine = user_scratch_dir();
  ASSERT_NE(mine, "");
  for (const std::string &d : {shared, mine}) {
    as_user_ok({"/bin/ln", "-s", etc, d + "/conf"});
    expect_refused({}, d + "/conf/passwd", owned_by_user());
    expect_etc_untouched(etc, "a user's link to a root directory in " + d);
  }
  // Deeper: the link is a directory on the way, not the last component.
  as_user_ok({"/bin/mkdir", "-p", mine + "/a/b"});
  as_user_ok({"/bin/ln", "-s", etc, mine + "/a/b/c"});
  expect_refused({}, mine + "/a/b/c/passwd", owned_by_user());
  expect_etc_untouched(etc, "a link deep in a user's tree");
}

// A link that root made, but in a directory others can write: sticky or
// not, someone else could replace it (fs.protected_symlinks's rule, applied
// everywhere). The user cannot make a root-owned link, so root makes it
// (as an old one would be) and the user's part is that the directory is
// writable.
TEST_F(OutputSafety, RootLinkInDirectoryOthersCanWriteIsNotFollowed) {
  std::string etc = fake_etc();
  std::string shared = shared_dir();
  std::string mine = user_scratch_dir();
  ASSERT_NE(mine, "");
  for (const std::string &d : {shared, mine}) {
    std::string link = d + "/rootlink";
    ASSERT_EQ(symlink((etc + "/passwd").c_str(), link.c_str()), 0);
    ASSERT_EQ(lchown(link.c_str(), 0, 0), 0);
    expect_refused({}, link, "which other users can write");
    expect_etc_untouched(etc, "root's link in " + d);
  }
  // A link the user owns in a root-only directory (root chowned it) is not
  // root's either.
  std::string priv = dir_ + "/private";
  ASSERT_EQ(mkdir(priv.c_str(), 0700), 0);
  std::string link = priv + "/userlink";
  ASSERT_EQ(symlink((etc + "/passwd").c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), uid_, gid_), 0);
  expect_refused({}, link, owned_by_user());
  expect_etc_untouched(etc, "a user-owned link in a root directory");
}

// Block devices are never written, not even when root names one or links
// to one: a node made by mknod in a scratch directory, the loop device
// itself, and root's own link to it.
TEST_F(OutputSafety, BlockDevicesAreNeverWritten) {
  LoopDevice disk(dir_);
  if (!disk.error().empty())
    GTEST_SKIP() << "no loop device: " << disk.error();
  std::string node = dir_ + "/disk-node";
  ASSERT_EQ(mknod(node.c_str(), S_IFBLK | 0600, disk.rdev()), 0);
  std::string link = dir_ + "/disk-link";
  ASSERT_EQ(symlink(node.c_str(), link.c_str()), 0);
  for (const std::string &target : {node, disk.path(), link})
    expect_refused({}, target, "block device");
  disk.expect_untouched("root's own paths to a block device");
}

// Character devices other than terminals and /dev/null act on what they
// are sent (/dev/kmsg logs it, /dev/mem writes memory): /dev/full stands
// for them here, harmlessly. A user's FIFO is refused at once rather than
// waited on, a socket always; a user's link is refused even to /dev/null.
TEST_F(OutputSafety, DevicesFifosAndSocketsOfOthersAreRefused) {
  expect_refused({}, "/dev/full", "character device (1:7)");
  std::string mine = user_scratch_dir();
  ASSERT_NE(mine, "");
  as_user_ok({"/usr/bin/mkfifo", mine + "/fifo"});
  expect_refused({}, mine + "/fifo", "FIFO owned by " + owned_by_user());
  if (access("/usr/bin/python3", X_OK) == 0) { // a socket node, bound
    as_user_ok({"/usr/bin/python3", "-c",
                "import socket; socket.socket(socket.AF_UNIX).bind('" + mine +
                    "/sock')"});
    expect_refused({}, mine + "/sock", "it is a socket");
  }
  as_user_ok({"/bin/ln", "-s", "/dev/null", mine + "/null"});
  expect_refused({}, mine + "/null", owned_by_user());
  // The link's text is the user's: shown escaped, on the one line.
  as_user_ok(
      {"/bin/ln", "-s", "/dev/null\noffcpu: \x1b[2Jforged", mine + "/esc"});
  expect_refused(
      {}, mine + "/esc",
      "is a symlink to /dev/null\\x0aoffcpu: \\x1b[2Jforged owned by");
  expect_refused({}, dir_, "is a directory");
}

// A user who turns the report's name into a link while offcpu traces:
// the temporary is not renamed over it and the user is told where the
// results are. (Planted after start; if the run starts slowly the link is
// refused at once instead, which is also safe.)
TEST_F(OutputSafety, NameTurnedIntoLinkDuringTheRunIsNotReplaced) {
  LoopDevice disk(dir_);
  if (!disk.error().empty())
    GTEST_SKIP() << "no loop device: " << disk.error();
  std::string mine = user_scratch_dir();
  ASSERT_NE(mine, "");
  std::string out = mine + "/late.folded";
  test::Subprocess p({OFFCPU_BIN, "-f", "-o", out, "3"});
  test::sleep_seconds(2.0);
  as_user_ok({"/bin/ln", "-s", disk.path(), out});
  auto r = p.wait(20);
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the user's link was replaced";
  glob_t g{};
  bool kept = glob((out + ".offcpu-*").c_str(), 0, nullptr, &g) == 0;
  std::string temp = kept ? g.gl_pathv[0] : "";
  globfree(&g);
  if (r.err.find("Tracing") != std::string::npos) {
    EXPECT_NE(r.err.find("it became a symlink while offcpu ran; the results "
                         "are in " +
                         temp),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(kept) << "the results were not kept";
    EXPECT_FALSE(test::parse_folded(slurp(temp)).empty())
        << "the kept results hold no stacks";
  } else {
    std::cerr << "offcpu had not started tracing after 2 s: the link was "
                 "refused at start\n";
    EXPECT_NE(r.err.find(owned_by_user()), std::string::npos) << r.err;
  }
  disk.expect_untouched("a link planted during the run");
}

// What root typed itself keeps working: stdout by name, /dev/null, a plain
// name in root's directory, root's own link in a root-only directory (the
// file it leads to is replaced, the link stays).
TEST_F(OutputSafety, WhatRootTypedKeepsWorking) {
  Timed t = run_offcpu({"-f", "-o", "/dev/stdout", "1"}, 1);
  expect_written(t, "-o /dev/stdout");
  EXPECT_FALSE(test::parse_folded(t.r.out).empty())
      << "-o /dev/stdout wrote no stacks to stdout";

  t = run_offcpu({"-f", "-o", "/dev/stderr", "-o", "/dev/null", "1"}, 1);
  expect_written(t, "-o /dev/stderr -o /dev/null");
  EXPECT_EQ(t.r.out, "");
  std::string report; // stderr without offcpu's own lines
  std::istringstream err(t.r.err);
  for (std::string line; std::getline(err, line);)
    if (line.rfind("offcpu: ", 0) != 0)
      report += line + "\n";
  EXPECT_FALSE(test::parse_folded(report).empty())
      << "-o /dev/stderr wrote no stacks to stderr";

  std::string cwd = dir_ + "/cwd";
  ASSERT_EQ(mkdir(cwd.c_str(), 0755), 0);
  auto r = test::run({"/bin/sh", "-c",
                      "cd '" + cwd + "' && exec '" + OFFCPU_BIN +
                          "' -o out.folded -o out.svg 1"},
                     30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(test::parse_folded(slurp(cwd + "/out.folded")).empty());
  EXPECT_NE(slurp(cwd + "/out.svg").find("<svg"), std::string::npos);
  glob_t g{};
  EXPECT_NE(glob((cwd + "/*.offcpu-*").c_str(), 0, nullptr, &g), 0)
      << "temporary left: " << g.gl_pathv[0];
  globfree(&g);

  std::string priv = dir_ + "/private";
  ASSERT_EQ(mkdir(priv.c_str(), 0700), 0);
  std::string real = priv + "/run1.folded", link = priv + "/latest.folded";
  ASSERT_TRUE(write_file(real, "old\n", 0644));
  ASSERT_EQ(symlink("run1.folded", link.c_str()), 0);
  t = run_offcpu({"-o", link, "1"}, 1);
  expect_written(t, "-o root's link");
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "root's link was replaced by a file";
  EXPECT_FALSE(test::parse_folded(slurp(real)).empty())
      << "the file root's link leads to was not written";
}

// Shell redirections and substitutions name our own descriptors: written
// where the shell pointed them (a file stays a file, written in place).
TEST_F(OutputSafety, OwnDescriptorsAreWrittenInPlace) {
  std::string file = dir_ + "/redirected.folded";
  auto r = test::run({"/bin/sh", "-c",
                      "exec '" + std::string(OFFCPU_BIN) +
                          "' -f -o /dev/fd/3 1 3>'" + file + "'"},
                     30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(test::parse_folded(slurp(file)).empty());
  struct stat st {};
  EXPECT_EQ(lstat("/dev/fd", &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "/dev/fd was replaced";
  // A descriptor open only for reading is refused, before tracing.
  r = test::run(
      {"/bin/sh", "-c",
       "exec '" + std::string(OFFCPU_BIN) + "' -f -o /dev/fd/3 1 3</dev/null"},
      30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("descriptor 3 is open for reading only"),
            std::string::npos)
      << r.err;
}

// `offcpu flamegraph FILE` says what is wrong with FILE, never "Success".
TEST_F(OutputSafety, FlamegraphInputErrorsSayWhy) {
  struct Case {
    std::string input, expect;
  };
  std::string big = dir_ + "/big.folded";
  ASSERT_TRUE(write_file(big, "", 0644));
  ASSERT_EQ(truncate(big.c_str(), (off_t{1} << 30) + 1), 0);
  const Case cases[] = {
      {"/dev/urandom", "cannot read /dev/urandom: it is a character device "
                       "(1:9); to read from a device, pipe"},
      {dir_, "cannot read " + dir_ + ": it is a directory"},
      {dir_ + "/missing",
       "cannot read " + dir_ + "/missing: No such file or directory"},
      {big, "cannot read " + big + ": larger than 1 GiB"},
  };
  for (const Case &c : cases) {
    double t0 = test::now_seconds();
    auto r = test::run({OFFCPU_BIN, "flamegraph", c.input}, 30);
    double took = test::now_seconds() - t0;
    EXPECT_EQ(r.exit_code, 2) << c.input << ": " << r.err;
    EXPECT_EQ(r.err.rfind("offcpu: " + c.expect, 0), 0u)
        << c.input << ": " << r.err;
    EXPECT_EQ(r.err.find("Success"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_LT(took, 2.0) << c.input;
  }
  // A FIFO and stdin are read as streams to their end.
  std::string fifo = dir_ + "/in.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = test::run({"/bin/sh", "-c",
                      "printf 'a;b;c 5\\na;d 7\\n' > '" + fifo + "' & exec '" +
                          OFFCPU_BIN + "' flamegraph --format folded '" + fifo +
                          "'"},
                     30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("a;b;c 5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a;d 7\n"), std::string::npos) << r.out;
  r = test::run({"/bin/sh", "-c",
                 "printf 'x;y 3\\n' | '" + std::string(OFFCPU_BIN) +
                     "' flamegraph --format folded -"},
                30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("x;y 3\n"), std::string::npos) << r.out;
}

} // namespace
} // namespace offcpu
