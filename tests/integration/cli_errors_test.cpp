// The real binary's exit codes and messages for bad input and missing
// privileges: one line on stderr, nothing on stdout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

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
      {"--perf-max-stack-depth", "1000"},
      // Empty filters: before, each traced the whole system.
      {"-n", ""},
      {"--state", ""},
      {"--cgroup", ""},
      {"-p", ""},
      {"-p", "1,,2"},
      {"-t", ""}};
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

// The options a command's --help lists: "-p,--pid PID   text" lines.
std::set<std::string> help_options(const std::string &help) {
  std::set<std::string> out;
  std::regex line("^  (-[^ ]+)");
  std::istringstream in(help);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line))
      continue;
    std::string names = m[1];
    for (size_t start = 0; start < names.size();) {
      size_t comma = names.find(',', start);
      out.insert(names.substr(start, comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
  }
  return out;
}

// Every option --help lists is in the man page and completed by bash, for
// each command.
TEST(Docs, EveryHelpOptionInManPageAndCompletion) {
  std::ifstream in(std::string(OFFCPU_SOURCE_DIR) + "/doc/offcpu.1");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string man = std::regex_replace(ss.str(), std::regex("\\\\-"), "-");
  const bool bash_completion =
      access("/usr/share/bash-completion/bash_completion", R_OK) == 0;
  for (std::string sub : {"", "rwsem", "lock", "flamegraph"}) {
    std::vector<std::string> args = {OFFCPU_BIN};
    if (!sub.empty())
      args.push_back(sub);
    args.push_back("--help");
    auto help = run(args, 30);
    ASSERT_EQ(help.exit_code, 0);
    auto options = help_options(help.out);
    ASSERT_GT(options.size(), sub == "flamegraph" ? 5u : 12u) << help.out;
    std::string completed;
    if (bash_completion) {
      std::string line = "offcpu " + (sub.empty() ? "" : sub + " ") + "-";
      completed =
          run({"/bin/bash", "-c",
               "source /usr/share/bash-completion/bash_completion; source " +
                   std::string(OFFCPU_SOURCE_DIR) +
                   "/completions/offcpu.bash; COMP_LINE='" + line +
                   "'; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(" + line +
                   "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _offcpu;"
                   " echo \" ${COMPREPLY[*]} \""},
              30)
              .out;
    }
    for (const std::string &o : options) {
      EXPECT_TRUE(std::regex_search(
          man, std::regex("(^|[^-A-Za-z])" + o + "([^-A-Za-z]|$)")))
          << o << " (offcpu " << sub << ") is not in doc/offcpu.1";
      if (bash_completion) {
        EXPECT_NE(completed.find(" " + o + " "), std::string::npos)
            << o << " (offcpu " << sub << ") is not completed: " << completed;
      }
    }
  }
  // flamegraph's own help lists only its own options.
  auto fg = help_options(run({OFFCPU_BIN, "flamegraph", "--help"}, 30).out);
  for (const char *foreign : {"--debug-dir", "-d", "--per-pid", "-p", "-q"})
    EXPECT_EQ(fg.count(foreign), 0u) << foreign;
}

TEST(Install, BinaryManPageAndCompletion) {
  char tmpl[] = "/tmp/offcpu-install-XXXXXX";
  std::string dest = mkdtemp(tmpl);
  auto r = run({"/usr/bin/env", "DESTDIR=" + dest, CMAKE_COMMAND_PATH,
                "--install", OFFCPU_BUILD_DIR, "--prefix", "/usr/local"},
               60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(access((dest + "/usr/local/sbin/offcpu").c_str(), X_OK), 0);
  std::string man = dest + "/usr/local/share/man/man1/offcpu.1";
  ASSERT_EQ(access(man.c_str(), R_OK), 0);
  if (access("/usr/bin/man", X_OK) == 0) {
    auto page = run({"/usr/bin/man", "-l", man}, 30);
    EXPECT_NE(page.out.find("EXIT STATUS"), std::string::npos) << page.err;
  }
  std::string comp =
      dest + "/usr/local/share/bash-completion/completions/offcpu";
  ASSERT_EQ(access(comp.c_str(), R_OK), 0);
  if (access("/usr/share/bash-completion/bash_completion", R_OK) != 0)
    GTEST_SKIP()
        << "bash-completion is not installed: completion not exercised";
  auto c =
      run({"/bin/bash", "-c",
           "source /usr/share/bash-completion/bash_completion; source " + comp +
               "; complete_at() { COMP_LINE=\"$*\"; COMP_POINT=${#COMP_LINE};"
               " COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _offcpu;"
               " echo \"${COMPREPLY[*]}\"; };"
               " complete_at offcpu --for; complete_at offcpu --format s"},
          30);
  EXPECT_NE(c.out.find("--format"), std::string::npos) << c.out << c.err;
  EXPECT_NE(c.out.find("svg"), std::string::npos) << c.out << c.err;
  run({"/bin/rm", "-rf", dest}, 10);
}

} // namespace
} // namespace offcpu
