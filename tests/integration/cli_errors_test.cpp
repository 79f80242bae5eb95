// The real binary's exit codes and messages for bad input and missing
// privileges: one line on stderr, nothing on stdout.
#include <gtest/gtest.h>
#include <unistd.h>

#include "support/process.h"

namespace offcpu {
namespace {

using test::run;

size_t lines(const std::string &s) {
  size_t n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

TEST(CliErrors, BadInputExitsTwoWithOneLine) {
  const std::vector<std::vector<std::string>> bad = {
      {"--bogus"},
      {"-p", "999999999"},
      {"0"},
      {"-5"},
      {"ten"},
      {"-u", "-k"},
      {"-p", "1,abc"},
      {"-m", "9", "-M", "1"},
      {"--perf-max-stack-depth", "1000"}};
  for (auto args : bad) {
    args.insert(args.begin(), OFFCPU_BIN);
    auto r = run(args, 30);
    EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("offcpu: ", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(CliErrors, HelpAndVersion) {
  auto help = run({OFFCPU_BIN, "--help"}, 30);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--folded"), std::string::npos);
  auto version = run({OFFCPU_BIN, "--version"}, 30);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("offcpu ", 0), 0u);
}

TEST(CliErrors, UnprivilegedUserIsToldWhatIsNeeded) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to drop to another user";
  test::Subprocess::Options as_nobody;
  as_nobody.run_as = 65534;
  auto r = run({OFFCPU_BIN, "-f", "1"}, 30, as_nobody);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("root"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CAP_BPF"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

} // namespace
} // namespace offcpu
