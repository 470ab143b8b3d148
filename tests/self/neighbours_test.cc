// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Odd environments and hostile neighbours (issue 34): a wrapper that ignores
// SIGCHLD, blocks every signal or closes the standard descriptors before it
// execs the test binary; queues of runs in other PID namespaces that share
// /dev/shm. Each run must give the verdict it would give anywhere, and leave
// nothing behind.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
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

// A neighbour plants a symbolic link where disttest will write a log or a
// trace: it truncated a root-owned 0600 file and overwrote another with the
// trace's JSON. Files are created, never followed; directories another user
// owns or can write are refused.
TEST(PlantedFilesTest, LogsAndTracesAreCreatedNeverFollowed) {
  const std::string dir = TempPath(".planted");
  const std::string victim = dir + "/victim";
  std::filesystem::create_directories(dir + "/logs/Verdicts.Passes/1ranks");
  std::filesystem::create_directories(dir + "/trace");
  std::ofstream(victim) << "secret";
  std::filesystem::permissions(victim, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write);
  std::filesystem::create_symlink(
      victim, dir + "/logs/Verdicts.Passes/1ranks/rank-0.log");
  std::filesystem::create_symlink(
      victim, dir + "/trace/Verdicts.Passes.1ranks.trace.json");
  for (const auto& [variable, where] :
       {std::pair{"DISTTEST_LOG_DIR", "/logs"}, {"DISTTEST_TRACE", "/trace"}}) {
    SCOPED_TRACE(variable);
    Verdict v = RunVerdicts(kForkSetup, "Verdicts.Passes/1ranks",
                            {{variable, dir + where}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out << v.run.err;
    EXPECT_THAT(v.run.out, HasSubstr("it is a symbolic link, which disttest "
                                     "does not follow"))
        << v.run.out;
    EXPECT_EQ(ReadFile(victim), "secret");
  }

  // A link planted for a directory below the one named.
  std::filesystem::create_directories(dir + "/elsewhere");
  std::filesystem::create_directory_symlink(dir + "/elsewhere",
                                            dir + "/logs/Verdicts.Throws");
  Verdict link = RunVerdicts(kForkSetup, "Verdicts.Throws/2ranks",
                             {{"DISTTEST_LOG_DIR", dir + "/logs"}});
  EXPECT_THAT(link.run.out, HasSubstr("logs/Verdicts.Throws: it is a symbolic "
                                      "link"))
      << link.run.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/elsewhere"));

  // A directory that others can write to, and one another user owns.
  std::filesystem::create_directories(dir + "/open");
  std::filesystem::permissions(dir + "/open", std::filesystem::perms::all);
  Verdict open = RunVerdicts(kForkSetup, "Verdicts.Passes/1ranks",
                             {{"DISTTEST_LOG_DIR", dir + "/open"}});
  EXPECT_EQ(open.run.exit_code, 1);
  EXPECT_THAT(open.run.out,
              HasSubstr("other users can write to it (mode 777) and it is not "
                        "sticky"))
      << open.run.out;
  if (geteuid() == 0) {
    std::filesystem::create_directories(dir + "/theirs");
    ASSERT_EQ(chown((dir + "/theirs").c_str(), 65534, 65534), 0);
    Verdict theirs = RunVerdicts(kForkSetup, "Verdicts.Passes/1ranks",
                                 {{"DISTTEST_LOG_DIR", dir + "/theirs"}});
    EXPECT_EQ(theirs.run.exit_code, 1);
    EXPECT_THAT(theirs.run.out, HasSubstr("it is owned by uid 65534, not by "
                                          "this user (uid 0)"))
        << theirs.run.out;
  }
  // Without a plant, the same run writes its log, readable by its user alone.
  Verdict clean = RunVerdicts(kForkSetup, "Verdicts.Passes/1ranks",
                              {{"DISTTEST_LOG_DIR", dir + "/fresh/logs"}});
  EXPECT_EQ(clean.run.exit_code, 0) << clean.run.out;
  struct stat st {};
  ASSERT_EQ(
      stat((dir + "/fresh/logs/Verdicts.Passes/1ranks/rank-0.log").c_str(),
           &st),
      0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::filesystem::remove_all(dir);
}

// A log directory that cannot be made (a name past NAME_MAX) fails the
// test naming it, and the directories made on the way to it go again
// (trial 11: a 4857-character DISTTEST_LOG_DIR left them).
TEST(PlantedFilesTest, ALogDirectoryThatCannotBeMadeLeavesNothing) {
  const std::string dir = TempPath(".unmade");
  std::filesystem::create_directories(dir);
  const std::string name(300, 'n');
  Verdict v = RunVerdicts(kForkSetup, "Verdicts.Passes/1ranks",
                          {{"DISTTEST_LOG_DIR", dir + "/a/b/" + name + "/c"}});
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(name + ": File name too long")) << v.run.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "left " << dir << "/a";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(LaunchModes, NeighboursTest,
                         ::testing::Values(kForkSetup, kExecSetup),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace disttest::testing
