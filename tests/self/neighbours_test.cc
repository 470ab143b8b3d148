// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Odd environments and hostile neighbours (issue 34): a wrapper that ignores
// SIGCHLD, blocks every signal or closes the standard descriptors before it
// execs the test binary; queues of runs in other PID namespaces that share
// /dev/shm. Each run must give the verdict it would give anywhere, and leave
// nothing behind.
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "driver.h"

namespace disttest::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class NeighboursTest : public ::testing::TestWithParam<ChildSetup> {
 protected:
  // The child binary on `filter` under the wrapper with `flags`, its XML
  // report kept.
  Verdict RunWrapped(const std::vector<std::string>& flags,
                     const std::string& filter,
                     const OutputWatch& watch = nullptr) {
    const std::string xml = TempPath(".xml");
    std::vector<std::string> args = {DISTTEST_HOSTILE_PARENT};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(),
                {"--", GetParam().binary, "--gtest_filter=" + filter,
                 "--gtest_output=xml:" + xml});
    Verdict v;
    v.run = RunChild(args, {{"VERDICTS_LAUNCH", GetParam().launch}},
                     std::chrono::seconds(120), watch);
    v.xml = ReadFile(xml);
    std::filesystem::remove(xml);
    EXPECT_FALSE(v.run.timed_out) << v.run.out << v.run.err;
    EXPECT_THAT(KillOrphans(), IsEmpty());
    EXPECT_THAT(ShmLeftovers(v.run.pid), IsEmpty());
    return v;
  }
};

// SIG_IGN for SIGCHLD is kept across exec, and makes the kernel reap the
// ranks before they can be waited for: every spawned test failed "could not
// be waited for: No child processes".
TEST_P(NeighboursTest, IgnoredSigchldIsPutBackAndTheVerdictsAreTheUsualOnes) {
  Verdict v = RunWrapped({"--ignore-sigchld"},
                         "Verdicts.Passes/*:Verdicts.Throws/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr("SIGCHLD was ignored (SIG_IGN"));
  EXPECT_THAT(v.run.out, HasSubstr("set back to the default"));
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 3 tests"));
  EXPECT_THAT(v.run.out, HasSubstr("marker-throw"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("No child processes")));
}

// A mask of every signal is kept across exec: SIGTERM stayed pending, the
// report never came, and the run had to be SIGKILLed with its queues left.
TEST_P(NeighboursTest, BlockedSignalsAreUnblockedAndSigtermStillReports) {
  bool sent = false;
  Verdict v = RunWrapped(
      {"--block-signals"}, "Verdicts.HangsForSignalTests/2ranks",
      [&](pid_t pid, const std::string& out, const std::string&) {
        if (!sent && out.find("marker-running rank 0") != std::string::npos &&
            out.find("marker-running rank 1") != std::string::npos) {
          kill(pid, SIGTERM);
          sent = true;
        }
      });
  ASSERT_TRUE(sent) << v.run.out << v.run.err;
  EXPECT_EQ(v.run.signal, SIGTERM) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr("SIGTERM, SIGINT, SIGCHLD, SIGUSR2 were "
                                   "blocked"));
  EXPECT_THAT(v.run.out, HasSubstr("disttest got SIGTERM"));
  EXPECT_THAT(TestCaseXml(v.xml, "HangsForSignalTests/2ranks"),
              HasSubstr("disttest got SIGTERM"))
      << v.xml;
}

// `./tests >&-`: descriptor 1 became the store's listening socket, the next
// progress line died of SIGPIPE, with no XML and the queues left.
TEST_P(NeighboursTest, ClosedStandardDescriptorsLoseNeitherTheVerdictNorXml) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--close=1"},
        std::vector<std::string>{"--close=0", "--close=1", "--close=2"}}) {
    SCOPED_TRACE(flags.size() == 1 ? "stdout closed" : "0-2 closed");
    Verdict v = RunWrapped(flags, "Verdicts.Passes/*:Verdicts.Throws/2ranks");
    EXPECT_EQ(v.run.exit_code, 1) << v.run.err;
    EXPECT_EQ(v.run.signal, 0);
    EXPECT_THAT(TestCaseXml(v.xml, "Passes/3ranks"),
                HasSubstr("result=\"completed\""))
        << v.xml;
    EXPECT_THAT(TestCaseXml(v.xml, "Passes/3ranks"),
                Not(HasSubstr("<failure")));
    EXPECT_THAT(TestCaseXml(v.xml, "Throws/2ranks"), HasSubstr("marker-throw"))
        << v.xml;
  }
}

INSTANTIATE_TEST_SUITE_P(LaunchModes, NeighboursTest,
                         ::testing::Values(kForkSetup, kExecSetup),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace disttest::testing
