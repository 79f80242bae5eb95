// The bases of the integration tests' fixtures. ScratchDirTest gives each
// test a directory of its own, removed after it; RootTest also skips unless
// run as root, as offcpu loads BPF programs. Fixtures that set up more call
// the base's SetUp() first and return when IsSkipped().
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "support/process.h"

namespace offcpu::test {

class ScratchDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    // Named after the suite, so a directory left by a crash says whose.
    std::string suite = ::testing::UnitTest::GetInstance()
                            ->current_test_info()
                            ->test_suite_name();
    std::replace(suite.begin(), suite.end(), '/', '-');
    std::string tmpl = "/tmp/offcpu-" + suite + "-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "mkdtemp " << tmpl;
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty())
      test::run({"/bin/rm", "-rf", dir_}, 30);
  }

  std::string dir_; // empty when skipped
};

class RootTest : public ScratchDirTest {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
    ScratchDirTest::SetUp();
  }
};

} // namespace offcpu::test
