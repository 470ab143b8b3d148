// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// This process's command line, as a re-executed rank and a rerun line use
// it (harness/process/command_line.h).
#include "harness/process/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

namespace disttest::internal {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

// Sets a variable for one scope, and puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CommandLineTest, ReadsThisProcessesArguments) {
  const std::vector<std::string> args = ReadCommandLine();
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(std::filesystem::path(args[0]).filename(), "harness_units_test");
}

TEST(CommandLineTest, ParentOnlyFlagsAreGtestsRunFlags) {
  for (const char* flag :
       {"--gtest_filter=A.*", "--gtest_output=xml:x.xml", "--gtest_repeat=3",
        "--gtest_shuffle", "--gtest_also_run_disabled_tests",
        "--gtest_list_tests"}) {
    EXPECT_TRUE(IsParentOnlyFlag(flag)) << flag;
  }
  // What the test itself reads, and gtest flags that change no rank's run.
  for (const char* flag : {"--my_flag=1", "--gtest_color=no",
                           "--gtest_death_test_style=threadsafe", "data.bin"}) {
    EXPECT_FALSE(IsParentOnlyFlag(flag)) << flag;
  }
}

TEST(CommandLineTest, RerunNamesThisBinaryAndTheOneTest) {
  const std::string line = RerunCommand("Suite.Name/2ranks");
  EXPECT_THAT(line, HasSubstr("harness_units_test"));
  EXPECT_THAT(line, EndsWith(" --gtest_filter=Suite.Name/2ranks"));
  // This run's own filter is not the rerun's.
  EXPECT_EQ(line.find("--gtest_filter"), line.rfind("--gtest_filter")) << line;
}

TEST(CommandLineTest, RerunQuotesWhatTheShellWouldSplit) {
  EXPECT_THAT(RerunCommand("Suite.Name/it's 2ranks"),
              EndsWith(" '--gtest_filter=Suite.Name/it'\\''s 2ranks'"));
}

// gtest's filter reads ':' as a split, '-' as the start of the tests to
// leave out, '*' as any run: "Typed/fp-16.F" ran no test. '?' matches each.
TEST(CommandLineTest, RerunFilterMatchesANameWithTheFiltersOwnCharacters) {
  EXPECT_THAT(RerunCommand("Typed/fp-16:x*.Name/2ranks"),
              EndsWith(" '--gtest_filter=Typed/fp?16?x?.Name/2ranks'"));
}

TEST(CommandLineTest, RerunOfADisabledTestRunsIt) {
  EXPECT_THAT(RerunCommand("Suite.DISABLED_Name/2ranks"),
              EndsWith(" --gtest_also_run_disabled_tests"));
}

TEST(CommandLineTest, RerunKeepsTheVariablesThatChangeTheRun) {
  ScopedVariable timeout("DISTTEST_TIMEOUT", "30");
  ScopedVariable scale("DISTTEST_TIMEOUT_SCALE", "1");
  ScopedVariable gpus("DISTTEST_GPUS", "3,5");
  ScopedVariable launch("DISTTEST_LAUNCH", "exec");
  // Before the binary (other kept variables the caller set may come too).
  const std::string with_gpus = RerunCommand("S.N/2ranks");
  EXPECT_LT(with_gpus.find("DISTTEST_GPUS=3,5 "),
            with_gpus.find("harness_units_test"))
      << with_gpus;
  const std::string without_gpus = RerunCommand("S.N/2ranks", false);
  EXPECT_LT(without_gpus.find("DISTTEST_TIMEOUT=30 "),
            without_gpus.find("harness_units_test"))
      << without_gpus;
  EXPECT_THAT(without_gpus, Not(HasSubstr("DISTTEST_GPUS")));
  // A test that fails only in re-executed ranks is rerun in them.
  EXPECT_LT(without_gpus.find("DISTTEST_LAUNCH=exec "),
            without_gpus.find("harness_units_test"))
      << without_gpus;
  // A factor of 1 changes nothing a rerun needs.
  EXPECT_THAT(without_gpus, Not(HasSubstr("DISTTEST_TIMEOUT_SCALE")));
}

TEST(CommandLineTest, ThisProcessIsNoDeathTestsChild) {
  EXPECT_FALSE(IsDeathTestChild());
}

}  // namespace
}  // namespace disttest::internal
