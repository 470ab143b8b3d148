// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Verdict self-tests, in the way googletest tests itself: run a distributed
// test that must pass, fail, skip, crash or hang in the child binary
// verdicts_child_ (both launch modes), then check the exit status, the
// "[rank r/N]" messages at the child's file:line, the XML, the time to the
// verdict, and that nothing was left behind.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "child_process.h"
#include "driver.h"
#include "env/knobs.h"

namespace disttest::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The "marker-pool <test> pid <pid> count <n>" lines of rank `rank`:
// test -> {pid, n}.
std::map<std::string, std::pair<int, int>> PoolLines(const std::string &out,
                                                     int rank);

// How often `needle` occurs in `haystack` (an int, as the counts it is
// compared with).
int Count(const std::string &haystack, const std::string &needle) {
  return static_cast<int>(Occurrences(haystack, needle));
}

class VerdictsTest : public ::testing::TestWithParam<ChildSetup> {
protected:
  Verdict Run(const std::string &filter,
              std::vector<std::pair<std::string, std::string>> env = {}) {
    return RunVerdicts(GetParam(), filter, std::move(env));
  }
};

TEST_P(VerdictsTest, PassingTestPassesAtEverySize) {
  Verdict v = Run("Verdicts.Passes/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (const char *name : {"Passes/1ranks", "Passes/2ranks", "Passes/3ranks"}) {
    std::string tc = TestCaseXml(v.xml, name);
    EXPECT_THAT(tc, HasSubstr("result=\"completed\"")) << name << "\n" << v.xml;
    EXPECT_THAT(tc, Not(HasSubstr("<failure"))) << name;
  }
}

TEST_P(VerdictsTest, NonFatalFailureOnOneRankNamesOnlyThatRank) {
  Verdict v = Run("Verdicts.FailsOnRank1Only/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr(FailureAt("marker-nonfatal", "[rank 1/2]")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
  std::string tc = TestCaseXml(v.xml, "FailsOnRank1Only/2ranks");
  EXPECT_THAT(tc, HasSubstr("<failure message="));
  EXPECT_THAT(tc, HasSubstr("[rank 1/2]"));
  // The rerun command is this binary with the user's own arguments and
  // exactly this test.
  std::string user_args =
      *GetParam().extra_arg ? std::string(GetParam().extra_arg) + " " : "";
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string("rerun this test alone: ") +
                        GetParam().binary + " " + user_args +
                        "--gtest_filter=Verdicts.FailsOnRank1Only/2ranks\n"));
}

TEST_P(VerdictsTest, FatalFailureOnRankZeroEndsItsWaitingPeer) {
  Verdict v = Run("Verdicts.FailsFatallyOnRank0/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr(FailureAt("marker-fatal", "[rank 0/2]")));
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] was killed by disttest: still running "
                        "300 ms after rank 0 failed"));
  // The busy peer is ended after the grace, not at the 60 s timeout.
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
}

TEST_P(VerdictsTest, PeerBlockedInACollectiveWithADeadRankFailsPromptly) {
  Verdict v = Run("Verdicts.PeerOfADeadRankFailsInItsCollective/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-fatal-collective", "[rank 0/2]")));
  // The harness saw rank 0 end and said so in the ranks' arena.
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] the test body threw disttest::CommError: "
                        "[rank 1/2] barrier failed: rank 0 ended while its "
                        "peers waited for it in a collective"));
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
}

// A test's ranks share a same-host arena for small collectives: forked ones
// through the mapping, re-executed ones through the descriptor they keep
// across exec. With DISTTEST_NO_HOST_ARENA=1 they use Gloo alone.
TEST_P(VerdictsTest, RanksShareAHostArena) {
  Verdict v = Run("Verdicts.ReportsItsHostArena/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("[rank {}] marker-arena yes\n", r)));
  }
  Verdict off = Run("Verdicts.ReportsItsHostArena/3ranks",
                    {{"DISTTEST_NO_HOST_ARENA", "1"}});
  EXPECT_EQ(off.run.exit_code, 0) << off.run.out << off.run.err;
  EXPECT_THAT(off.run.out, HasSubstr("[rank 1] marker-arena no\n"));
  EXPECT_THAT(off.run.out, Not(HasSubstr("marker-arena yes")));
}

// Ranks that disagree about a collective fail at once, every one of them,
// with one message naming what each rank called: through the host arena,
// through Gloo (buffers too large for the arena's slots, and every buffer
// under DISTTEST_NO_HOST_ARENA=1), and for an empty buffer against a full one.
TEST_P(VerdictsTest, RanksThatDisagreeAboutACollectiveAllFail) {
  struct Case {
    const char *test;
    int world;
    const char *calls;
  };
  const Case cases[] = {
      {"AllReduceAgainstBroadcast", 2,
       "rank 0: allreduce(8 x float32, sum); rank 1: broadcast(8 x float32, "
       "root 0)"},
      {"CountsDiffer", 2,
       "rank 0: allreduce(8 x float32, sum); rank 1: allreduce(16 x float32, "
       "sum)"},
      {"TypesDiffer", 2,
       "rank 0: allreduce(8 x float64, sum); rank 1: allreduce(8 x float32, "
       "sum)"},
      {"ReduceOpsDiffer", 2,
       "rank 0: allreduce(8 x float32, sum); rank 1: allreduce(8 x float32, "
       "max)"},
      {"EachRankItsOwnRoot", 2,
       "rank 0: broadcast(8 x float32, root 0); rank 1: broadcast(8 x "
       "float32, root 1)"},
      {"BarrierAgainstAllReduce", 2,
       "rank 0: barrier(); rank 1: allreduce(8 x float32, sum)"},
      {"ReduceAgainstAllReduce", 2,
       "rank 0: reduce(8 x float32, sum, root 0); rank 1: allreduce(8 x "
       "float32, sum)"},
      {"EachRankScattersFromItself", 2,
       "rank 0: scatter(8 x int32, root 0); rank 1: scatter(8 x int32, root "
       "1)"},
      {"AllGatherVCountsDiffer", 2,
       "rank 0: allgatherv(4 x float32, counts {1, 3}); rank 1: "
       "allgatherv(4 x float32, counts {3, 1})"},
      {"AllGatherAgainstAllReduce", 2,
       "rank 0: allgather(8 x float32); rank 1: allreduce(8 x float32, sum)"},
      {"OneAllGathersWhileThreeBarrier", 4,
       "ranks 0-1, 3: barrier(); rank 2: allgather(8 x float32)"},
      {"LargeCountsDiffer", 2,
       "rank 0: allreduce(100000 x float32, sum); rank 1: allreduce(200000 x "
       "float32, sum)"},
      {"SmallAgainstLarge", 2,
       "rank 0: broadcast(8 x float32, root 0); rank 1: broadcast(100000 x "
       "float32, root 0)"},
      {"EmptyAgainstFull", 2,
       "rank 0: allreduce(0 x float32, sum); rank 1: allreduce(8 x float32, "
       "sum)"},
  };
  for (const char *no_arena : {"0", "1"}) {
    SCOPED_TRACE(std::string("DISTTEST_NO_HOST_ARENA=") + no_arena);
    Verdict v =
        Run("VerdictsMismatch.*", {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 1);
    // At once: not at the collectives' deadline (0.9 x the 60 s timeout).
    EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
    EXPECT_THAT(v.run.out, Not(HasSubstr("marker-mismatch-passed")));
    EXPECT_THAT(v.run.out, Not(HasSubstr("was killed by disttest")));
    for (const Case &c : cases) {
      std::string tc =
          TestCaseXml(v.xml, fmt::format("{}/{}ranks", c.test, c.world));
      EXPECT_THAT(tc, HasSubstr("<failure")) << c.test;
      // Every rank fails naming every rank's call (ranks whose own call is
      // the same say it once, together).
      std::set<int> all;
      for (int r = 0; r < c.world; ++r)
        all.insert(r);
      EXPECT_EQ(
          RanksNaming(tc, fmt::format("failed: collective #1 does not match "
                                      "across the {} ranks: {}",
                                      c.world, c.calls)),
          all)
          << c.test << "\n"
          << tc;
      EXPECT_THAT(tc, HasSubstr("the test body threw disttest::CommError: "))
          << c.test;
      // The ledger says the same, with where each rank called it.
      EXPECT_THAT(tc, HasSubstr("collective #1 on the world communicator does "
                                "not match across the ranks:\n"))
          << c.test << "\n"
          << tc;
      EXPECT_THAT(tc, HasSubstr(") at verdicts_child_.cc:")) << c.test;
    }
    // A caught mismatch leaves the communicator failing, naming it.
    std::string caught =
        TestCaseXml(v.xml, "CaughtMismatchBreaksLaterCollectives/2ranks");
    EXPECT_EQ(Count(caught,
                    "[ranks 0-1 of 2] the test body threw disttest::CommError: "
                    "barrier failed: collective #1 did not match "
                    "across the ranks (see that error)"),
              2)
        << caught;
    // Ranks that agree pass, through the arena and Gloo, empty buffers too.
    for (const char *agree :
         {"AgreeingRanksPass/1ranks", "AgreeingRanksPass/3ranks"}) {
      std::string tc = TestCaseXml(v.xml, agree);
      EXPECT_THAT(tc, HasSubstr("result=\"completed\"")) << agree;
      EXPECT_THAT(tc, Not(HasSubstr("<failure"))) << agree << "\n" << tc;
    }
  }
}

// No wait catches ranks that reduce with different operators on a
// communicator the test made (no arena): every call returns, and the
// verdict fails the test from the ledgers' digests, naming each call.
TEST_P(VerdictsTest, CallsThatDifferFailTheTestThoughEveryCallReturned) {
  Verdict v =
      Run("VerdictsSilentMismatch.ReduceOpsDifferOnAUserCommunicator/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  // Both ranks returned: nothing else failed.
  EXPECT_THAT(v.run.out, HasSubstr("marker-silent-returned 0"));
  EXPECT_THAT(v.run.out, HasSubstr("marker-silent-returned 1"));
  const std::string at =
      fmt::format("verdicts_child_.cc:{}", LineOf("marker-silent-mismatch"));
  EXPECT_THAT(
      v.run.out,
      HasSubstr("collective #0 on my communicator did not match across "
                "the ranks, though every call returned (the data is "
                "not what the test meant):\n  rank 0 called "
                "allreduce(8 x float32, sum) at " +
                at + "\n  rank 1 called allreduce(8 x float32, max) at " + at))
      << v.run.out;
  EXPECT_THAT(TestCaseXml(v.xml, "ReduceOpsDifferOnAUserCommunicator/2ranks"),
              HasSubstr("<failure"));
}

// The same on a communicator made without a name, as store()'s
// documentation makes one (GlooOptions' prefix: "gloo"); and two pairs that
// each agree within themselves pass, though the pairs reduce differently.
TEST_P(VerdictsTest, CallsThatDifferFailOnAnUnnamedCommunicator) {
  Verdict v = Run(
      "VerdictsSilentMismatch.ReduceOpsDifferOnAnUnnamedCommunicator/2ranks:"
      "VerdictsSilentMismatch.PairsOnTheirOwnPrefixesDoNotMix/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("marker-unnamed-returned 0"));
  EXPECT_THAT(v.run.out, HasSubstr("marker-unnamed-returned 1"));
  const std::string at =
      fmt::format("verdicts_child_.cc:{}", LineOf("marker-unnamed-mismatch"));
  EXPECT_THAT(
      v.run.out,
      HasSubstr("collective #0 on communicator \"gloo\" did not match "
                "across the ranks, though every call returned (the data is "
                "not what the test meant):\n  rank 0 called "
                "allreduce(4 x float32, sum) at " +
                at + "\n  rank 1 called allreduce(4 x float32, max) at " + at))
      << v.run.out;
  EXPECT_THAT(
      TestCaseXml(v.xml, "ReduceOpsDifferOnAnUnnamedCommunicator/2ranks"),
      HasSubstr("<failure"));
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format("marker-pair-agreed {}", r)));
  }
  const std::string pairs =
      TestCaseXml(v.xml, "PairsOnTheirOwnPrefixesDoNotMix/4ranks");
  EXPECT_THAT(pairs, HasSubstr("result=\"completed\""));
  EXPECT_THAT(pairs, Not(HasSubstr("<failure"))) << pairs;
}

// Ranks that wait in one collective entered with different operations
// fail at once: the parent compares their calls in the ledgers while they
// wait, and the report names each rank's call.
TEST_P(VerdictsTest, RanksWaitingInCollectivesThatDifferFailAtOnce) {
  Verdict v = Run("VerdictsSilentMismatch.OperationsDifferAndWait/3ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  // The timeout is 60 s; the stacks of 3 ranks take a few.
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-live-returned")));
  EXPECT_THAT(v.run.out,
              HasSubstr("collective #0 on communicator \"live\" does not "
                        "match across the ranks, and ranks wait in it; "
                        "taking the stacks of 3 ranks"));
  const std::string paragraph = fmt::format(
      "collective #0 on communicator \"live\" does not match across the "
      "ranks:\n  ranks 0-1 (2 ranks) are in allreduce(8 x float32, sum) at "
      "verdicts_child_.cc:{}, for ",
      LineOf("marker-live-allreduce"));
  EXPECT_THAT(v.run.out, HasSubstr(paragraph)) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format("  rank 2 is in allgather(8 x float32) at "
                                    "verdicts_child_.cc:{}, for ",
                                    LineOf("marker-live-allgather"))));
  EXPECT_THAT(TestCaseXml(v.xml, "OperationsDifferAndWait/3ranks"),
              HasSubstr("<failure"));
}

TEST_P(VerdictsTest, SkipOnEveryRankSkipsTheTest) {
  Verdict v = Run("Verdicts.SkipsOnEveryRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("all 2 ranks skipped: marker-skip-all"));
  EXPECT_THAT(TestCaseXml(v.xml, "SkipsOnEveryRank/2ranks"),
              HasSubstr("result=\"skipped\""));
}

TEST_P(VerdictsTest, EachRanksSkipReasonIsKept) {
  Verdict v = Run("Verdicts.SkipsForDifferentReasons/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("all 3 ranks skipped: ranks 0, 2: "
                        "marker-skip-even; rank 1: marker-skip-odd"));
  EXPECT_THAT(TestCaseXml(v.xml, "SkipsForDifferentReasons/3ranks"),
              HasSubstr("result=\"skipped\""));
}

TEST_P(VerdictsTest, RanksThatSkipAtDifferentTimesStillSkipTheTest) {
  Verdict v = Run("Verdicts.SkipsOnEveryRankAtDifferentTimes/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("all 2 ranks skipped: marker-skip-late"));
}

TEST_P(VerdictsTest, ProcessesStartedByARankEndWithTheTest) {
  // Run() fails if the `sleep 600` a rank started is still alive.
  Verdict v = Run("Verdicts.StartsAProcessThatOutlivesTheRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
}

// A child that a rank forked (without exec) and left behind when it was
// killed is ended with the test, in either mode: a kExec rank's child
// started with the zygote's environment, not the rank's. Run() fails if it
// is still alive.
TEST_P(VerdictsTest, ForkedChildOfAKilledRankEndsWithTheTest) {
  Verdict v = Run("Verdicts.ForksAChildAndIsKilled/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] killed by signal 9 (SIGKILL)"));
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "\\[ disttest \\] note: Verdicts.ForksAChildAndIsKilled/"
                  "2ranks: ended process [0-9]+ \\(.*\\), which its ranks "
                  "started and left running"));
}

// A daemon (fork, fork, setsid) leaves the rank's process group; the rank,
// its subreaper, ends it when the test ends and says so. Run() fails if it
// is still alive (the driver is a subreaper too, and would inherit it).
TEST_P(VerdictsTest, DaemonStartedByARankEndsWithTheTest) {
  Verdict v = Run("Verdicts.StartsADaemon/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.err,
              ::testing::ContainsRegex(
                  "\\[rank 1\\] disttest: note: ended process [0-9]+ "
                  "\\(sleep 1000\\), which the test started and left "
                  "running\n"));
}

// A rank the harness cannot ask (it was killed) leaves its daemon to the
// parent, which ends it.
TEST_P(VerdictsTest, DaemonOfAKilledRankEndsWithTheTest) {
  Verdict v = Run("Verdicts.StartsADaemonAndIsKilled/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] killed by signal 9 (SIGKILL)"));
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "\\[ disttest \\] note: "
                  "Verdicts.StartsADaemonAndIsKilled/2ranks: ended process "
                  "[0-9]+ \\(sleep 1000\\), which its ranks started and "
                  "left running\n"));
}

// The same with a daemon started with an empty environment, which names no
// test, by a rank that dies or hangs (the harness kills it at the timeout):
// it outlived the test in exec mode. Run() fails if it is still alive.
TEST_P(VerdictsTest, BareDaemonOfAKilledOrHungRankEndsWithTheTest) {
  for (const char *test : {"Verdicts.StartsABareDaemonAndIsKilled/2ranks",
                           "VerdictsShortTimeout.StartsABareDaemonAndHangs/"
                           "2ranks"}) {
    SCOPED_TRACE(test);
    Verdict v = Run(test);
    EXPECT_EQ(v.run.exit_code, 1);
    EXPECT_THAT(v.run.out,
                ::testing::ContainsRegex(
                    "\\[ disttest \\] note: " + std::string(test) +
                    ": ended process [0-9]+ \\(sleep 1000\\), which its "
                    "ranks started and left running\n"))
        << v.run.out;
  }
}

TEST_P(VerdictsTest, SkipOnOneRankIsAFailureNamingIt) {
  Verdict v = Run("Verdicts.SkipsOnOneRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("rank 1 of 2 skipped (\"marker-skip-one\") while the "
                        "other ranks ran"));
}

TEST_P(VerdictsTest, SkipOnOneRankPassesWhenThePolicyAllowsIt) {
  Verdict v = Run("VerdictsAllowPartialSkip.SkipsOnOneRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[ disttest ] note: rank 1 of 2 skipped"));
}

TEST_P(VerdictsTest, ExceptionIsAFatalFailureOfItsRank) {
  Verdict v = Run("Verdicts.Throws/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] the test body threw "
                                   "std::runtime_error: marker-throw"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
}

TEST_P(VerdictsTest, ExitInTheBodyIsReportedWithItsStatus) {
  Verdict v = Run("Verdicts.CallsExit3/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] exited with status 3 before "
                                   "the test body finished"));
}

TEST_P(VerdictsTest, SignalIsReportedByName) {
  Verdict v = Run("Verdicts.KilledBySignal/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  // The root cause is on the terminal when it happens, and first in the
  // verdict, marked as such.
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] Verdicts.KilledBySignal/2ranks: first "
                        "failure, rank 0 after "));
  const std::size_t first =
      v.run.out.find("[rank 0/2] (first failure) killed by signal 9 (SIGKILL)");
  EXPECT_NE(first, std::string::npos) << v.run.out;
  // Its peer fails in the barrier (closed connection) or is ended after the
  // grace period; either way promptly, and listed after the root cause.
  const std::size_t peer = std::min(
      v.run.out.find("[rank 1/2] the test body threw disttest::CommError: "
                     "[rank 1/2] barrier failed"),
      v.run.out.find("[rank 1/2] was killed by disttest: still running 300 ms "
                     "after rank 0 killed by signal 9"));
  EXPECT_NE(peer, std::string::npos) << v.run.out;
  EXPECT_GT(peer, first) << v.run.out;
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
}

TEST_P(VerdictsTest, HangIsEndedAtTheTimeout) {
  Verdict v = Run("VerdictsShortTimeout.Hangs/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] was killed by disttest: the "
                                   "test timed out after 3000 ms"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
}

// DISTTEST_TIMEOUT_SCALE multiplies the test's timeout and says so; a
// malformed factor fails the test naming it.
TEST_P(VerdictsTest, TimeoutScaleMultipliesTheTimeout) {
  Verdict v = Run("VerdictsShortTimeout.Hangs/2ranks",
                  {{"DISTTEST_TIMEOUT_SCALE", "0.5"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] was killed by disttest: the "
                                   "test timed out after 1500 ms (x0.5: "
                                   "DISTTEST_TIMEOUT_SCALE)"))
      << v.run.out;
  Verdict bad = Run("VerdictsShortTimeout.Hangs/2ranks",
                    {{"DISTTEST_TIMEOUT_SCALE", "fast"}});
  EXPECT_EQ(bad.run.exit_code, 1);
  EXPECT_THAT(bad.run.out,
              HasSubstr("environment variable DISTTEST_TIMEOUT_SCALE='fast' "
                        "is invalid: it must be a number greater than 0 and "
                        "at most 100"))
      << bad.run.out;
  EXPECT_LT(bad.run.elapsed, std::chrono::seconds(2));
}

// Runs `test` (of 2 ranks) with a 1 s timeout and a stack tool that takes
// 2 s and prints marker-slow-stack-tool, no stack.
Verdict RunWithSlowStackTool(const ChildSetup &setup, const std::string &test) {
  const std::string dir = TempPath(".tools");
  std::filesystem::create_directory(dir);
  {
    std::ofstream tool(dir + "/eu-stack");
    tool << "#!/bin/sh\nsleep 2\necho 'marker-slow-stack-tool'\n";
  }
  std::filesystem::permissions(dir + "/eu-stack",
                               std::filesystem::perms::owner_all);
  const char *path = std::getenv("PATH");
  Verdict v =
      RunVerdicts(setup, test,
                  {{"DISTTEST_TIMEOUT", "1"},
                   {"PATH", dir + ":" + (path != nullptr ? path : "")}});
  std::filesystem::remove_all(dir);
  return v;
}

// The timeout is decided when it expires: a rank that ends while the
// harness takes its stack (a slow stack tool: this one takes 2 s) has still
// overrun it.
TEST_P(VerdictsTest, RankThatEndsWhileItsStackIsTakenHasTimedOut) {
  Verdict v = RunWithSlowStackTool(
      GetParam(), "VerdictsShortTimeout.FinishesJustAfterTheTimeout/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] did not finish in time: the test timed "
                        "out after 1000 ms; it ended by itself only while "
                        "disttest took the stacks; it was here:\n"));
  EXPECT_THAT(v.run.out, HasSubstr("marker-slow-stack-tool"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
}

// Unless it failed meanwhile (as a collective of its own gives up when the
// ranks started late): its failure is why it was late, and nothing is
// added to it: no overrun, no "stack" of a process that had ended.
TEST_P(VerdictsTest, RankThatFailsWhileItsStackIsTakenIsJudgedByItsFailure) {
  Verdict v = RunWithSlowStackTool(
      GetParam(), "VerdictsShortTimeout.FailsJustAfterTheTimeout/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] VerdictsShortTimeout."
                                   "FailsJustAfterTheTimeout/2ranks"));
  EXPECT_EQ(Occurrences(v.run.out, "marker-fails-late"), 1u) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] Failed\nmarker-fails-late"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("did not finish in time"))) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-slow-stack-tool"))) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
}

// But a fatal failure before the deadline excuses nothing: the rank
// failed and then overran.
TEST_P(VerdictsTest, RankThatFailedBeforeTheDeadlineAndEndsLateHasTimedOut) {
  Verdict v = RunWithSlowStackTool(
      GetParam(), "VerdictsShortTimeout.FailsEarlyAndFinishesLate/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] Failed\nmarker-fails-early"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] did not finish in time: the test timed "
                        "out after 1000 ms; it ended by itself only while "
                        "disttest took the stacks; it was here:\n"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
}

TEST_P(VerdictsTest, StoppedRankIsReportedAsStopped) {
  Verdict v = Run("VerdictsShortTimeout.StopsItself/2ranks",
                  {{"DISTTEST_TIMEOUT", "1"}, {"DISTTEST_HEARTBEAT", "0.2"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] VerdictsShortTimeout.StopsItself/2ranks: "
                        "stopped, not running (SIGSTOP, SIGTSTP or a tracer): "
                        "rank 1\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] was killed by disttest: the test timed out "
                        "after 1000 ms; it was stopped, not running (SIGSTOP, "
                        "SIGTSTP or a tracer)"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
}

TEST_P(VerdictsTest, TimeoutComesFromTheEnvironment) {
  Verdict v =
      Run("VerdictsShortTimeout.Hangs/2ranks", {{"DISTTEST_TIMEOUT", "0.5"}});
  EXPECT_THAT(v.run.out, HasSubstr("the test timed out after 500 ms"));
}

// DISTTEST_COMPARE_CALLS=0: ranks that disagree wait for the timeout (the
// report still names their calls); a value that is not 0 or 1 is named.
TEST_P(VerdictsTest, CompareCallsOffWaitsForTheTimeout) {
  Verdict v = Run("VerdictsSilentMismatch.OperationsDifferAndWait/3ranks",
                  {{"DISTTEST_COMPARE_CALLS", "0"}, {"DISTTEST_TIMEOUT", "2"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("the test timed out after 2000 ms"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("and ranks wait in it")));
  EXPECT_THAT(v.run.out, HasSubstr("collective #0 on communicator \"live\" "
                                   "does not match across the ranks:\n"));
  Verdict bad =
      Run("Verdicts.Passes/2ranks", {{"DISTTEST_COMPARE_CALLS", "yes"}});
  EXPECT_EQ(bad.run.exit_code, 1);
  EXPECT_THAT(bad.run.out, HasSubstr("DISTTEST_COMPARE_CALLS=\"yes\" is "
                                     "invalid: it must be 0 or 1"));
}

// options().compare_calls = false: a test that expects the error of calls
// that differ gets it, and passes.
TEST_P(VerdictsTest, ATestThatExpectsCallsToDifferSaysSo) {
  Verdict v =
      Run("VerdictsExpectsMismatch.CatchesTheTimeoutOfCallsThatDiffer/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-expected-mismatch 0"));
  EXPECT_THAT(v.run.out, HasSubstr("marker-expected-mismatch 1"));
}

TEST_P(VerdictsTest, MalformedTimeoutIsAClearFailure) {
  Verdict v = Run("Verdicts.Passes/2ranks", {{"DISTTEST_TIMEOUT", "soon"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("environment variable DISTTEST_TIMEOUT='soon' is not "
                        "a positive number of seconds"));
}

TEST_P(VerdictsTest, OutputArrivesLineByLinePrefixedWithTheRank) {
  Verdict v = Run("Verdicts.PrintsLines/2ranks");
  EXPECT_EQ(v.run.exit_code, 0);
  for (int r = 0; r < 2; ++r) {
    std::string rs = std::to_string(r);
    EXPECT_THAT(v.run.out, HasSubstr("[rank " + rs +
                                     "] marker-stdout from rank " + rs + "\n"));
    EXPECT_THAT(v.run.err, HasSubstr("[rank " + rs +
                                     "] marker-stderr from rank " + rs + "\n"));
  }
  // gtest_main's banner of a re-executed rank is not relayed.
  EXPECT_THAT(v.run.out, Not(HasSubstr("] Running main() from")));
}

TEST_P(VerdictsTest, InvalidWorldSizeIsAClearFailure) {
  Verdict v = Run("Verdicts.InvalidWorldSize/invalid_world_size_0");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("world size 0 is invalid: DIST_TEST_F "
                                   "world sizes must be between 1 and 1024"));
}

// A rank holds none of the descriptors the parent keeps for its siblings
// (their output pipes and pidfds): the last of 8 holds no more than the
// first.
TEST_P(VerdictsTest, RanksHoldNoneOfTheirSiblingsDescriptors) {
  Verdict v = Run("Verdicts.CountsItsDescriptors/8ranks");
  ASSERT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  // What follows each "marker-descriptors ", to the end of its line.
  std::set<std::string> counts;
  const std::string marker = "marker-descriptors ";
  for (std::size_t at = v.run.out.find(marker); at != std::string::npos;
       at = v.run.out.find(marker, at + 1)) {
    const std::size_t from = at + marker.size();
    counts.insert(v.run.out.substr(from, v.run.out.find('\n', from) - from));
  }
  EXPECT_EQ(Count(v.run.out, marker), 8) << v.run.out;
  EXPECT_EQ(counts.size(), 1u) << v.run.out;
}

// A connection of the test process that forked ranks inherit ends the way
// the test process ends it: the ranks reset only their own connections.
TEST_P(VerdictsTest, RanksDoNotResetConnectionsTheyInherit) {
  Verdict v = Run("VerdictsInheritedSocket.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr("marker-inherited-socket read 0 (end)\n"));
}

// Too few descriptors for 16 ranks: the test fails at once naming the
// limit, instead of hanging in a store wait until the timeout.
TEST_P(VerdictsTest, OpenFilesLimitTooLowIsAClearFailure) {
  Verdict v =
      Run("Verdicts.SixteenRanks/16ranks", {{"VERDICTS_RLIMIT_NOFILE", "64"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, ::testing::ContainsRegex(
                             "needs about [0-9]+ open files for 16 ranks, and "
                             "RLIMIT_NOFILE is 64 \\(hard limit 64\\): raise "
                             "it \\(ulimit -n\\) or run fewer ranks"));
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(10));
}

// A low soft limit under a higher hard one is raised, and the test runs.
TEST_P(VerdictsTest, LowSoftOpenFilesLimitIsRaised) {
  Verdict v = Run("Verdicts.SixteenRanks/16ranks",
                  {{"VERDICTS_RLIMIT_NOFILE_SOFT", "64"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "\\[ disttest \\] note: raised the open-files limit "
                  "\\(RLIMIT_NOFILE\\) from 64 to [0-9]+ for 16 ranks"));
}

// A /dev/shm too small for the result queues: the test fails naming it,
// the space needed and the space free (in a mount namespace of its own).
TEST_P(VerdictsTest, FullDevShmIsAClearFailure) {
  Verdict v =
      Run("Verdicts.SixteenRanks/16ranks", {{"VERDICTS_TINY_DEV_SHM", "1"}});
  if (v.run.out.find("marker-no-namespace") != std::string::npos) {
    GTEST_SKIP() << "cannot make a mount namespace here (needs root): "
                 << v.run.out;
  }
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "the result queues of 16 ranks need [0-9.]+ KiB in "
                  "/dev/shm, which has 256.0 KiB free"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("SIGBUS")));
}

// MASTER_PORT is for the code under test (the harness's store is on a port
// of its own): rank 0 can serve a store there, as torch's env:// does, and
// launch_from_env() works inside a test.
TEST_P(VerdictsTest, CodeUnderTestCanServeAStoreOnMasterPort) {
  Verdict v = Run("Verdicts.CodeServesItsOwnStoreOnMasterPort/*:Verdicts."
                  "LaunchFromEnvInsideATest/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("[rank {}] marker-own-store {}", r, r)));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                               "[rank {}] marker-launch-from-env {}", r, r)));
  }
}

// EXPECT_DEATH in a rank, in gtest's "fast" style and in the "threadsafe"
// one its warning recommends (the binary re-executed: the child runs the
// body as the rank that started it, not a distributed test of its own).
TEST_P(VerdictsTest, DeathTestsWorkInARankInBothStyles) {
  for (const char *style : {"fast", "threadsafe"}) {
    SCOPED_TRACE(style);
    Verdict v = Run("Verdicts.DeathTest*", {{"GTEST_DEATH_TEST_STYLE", style}});
    EXPECT_EQ(v.run.exit_code, 1);
    std::string dies = TestCaseXml(v.xml, "DeathTestInARank/2ranks");
    EXPECT_THAT(dies, HasSubstr("result=\"completed\""));
    EXPECT_THAT(dies, Not(HasSubstr("<failure"))) << dies;
    std::string survives = TestCaseXml(v.xml, "DeathTestThatDoesNotDie/2ranks");
    EXPECT_THAT(survives,
                HasSubstr("[rank 1/2] Death test: std::fprintf(stderr, "
                          "&quot;marker-survives\\n&quot;)"))
        << survives;
    EXPECT_THAT(survives, HasSubstr("failed to die"));
    EXPECT_THAT(survives, Not(HasSubstr("[rank 0/2]")));
    EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
  }
}

TEST_P(VerdictsTest, WorldSizeListedTwiceIsARegistrationError) {
  Verdict v = Run("Verdicts.WorldSizeListedTwice/*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Verdicts.WorldSizeListedTwice/"
                                   "1ranks_listed_again"));
  EXPECT_THAT(v.run.out,
              HasSubstr("DIST_TEST_F(Verdicts, WorldSizeListedTwice, ...) "
                        "lists world size 1 more than once; list each world "
                        "size once"));
  // The sizes themselves run once each.
  EXPECT_THAT(TestCaseXml(v.xml, "WorldSizeListedTwice/1ranks"),
              Not(HasSubstr("<failure")));
  EXPECT_THAT(TestCaseXml(v.xml, "WorldSizeListedTwice/2ranks"),
              Not(HasSubstr("<failure")));
}

TEST_P(VerdictsTest, RankEnvironmentIsSetAndParentOnlyVariablesRemoved) {
  Verdict v = Run("Verdicts.ChildEnvironment/2ranks",
                  {{"GTEST_TOTAL_SHARDS", "1"},
                   {"GTEST_SHARD_INDEX", "0"},
                   {"NCCL_DEBUG", "INFO"},
                   {"XML_OUTPUT_FILE", "/nonexistent/x.xml"},
                   {"TEST_PREMATURE_EXIT_FILE", TempPath(".premature")}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

TEST_P(VerdictsTest, GtestOutputVariableDoesNotReachTheRanks) {
  // With GTEST_OUTPUT inherited, every rank of an exec-mode test would write
  // (and overwrite) the report; only the parent may. What fails if it leaks
  // is the rank's own EXPECT_EQ(getenv("GTEST_OUTPUT"), nullptr) in
  // ChildEnvironment, hence the exit code.
  std::string xml = TempPath(".env.xml");
  Verdict v =
      Run("Verdicts.ChildEnvironment/2ranks", {{"GTEST_OUTPUT", "xml:" + xml}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  std::string report = ReadFile(xml);
  std::filesystem::remove(xml);
  // Nothing writes to the variable's path: the parent follows the driver's
  // --gtest_output flag, and a rank ends with _exit before gtest's XML.
  EXPECT_EQ(report, "");
}

TEST_P(VerdictsTest, FatalFailureInSetUpRankSkipsTheBodyButNotTearDown) {
  Verdict v = Run("VerdictsRankHooks.FatalSetUpSkipsBody/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-setup-fatal", "[rank 1/2]")));
  EXPECT_THAT(v.run.out, HasSubstr("[rank 0] marker-body rank 0"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 1] marker-body")));
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1] marker-teardown rank 1"));
}

TEST_P(VerdictsTest, CommWithoutInitDistributedSaysWhy) {
  Verdict v = Run("VerdictsNoComm.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("comm() is not available: "
                                   "options().init_distributed is false"));
  EXPECT_THAT(TestCaseXml(v.xml, "RunsWithoutCommunicator/3ranks"),
              Not(HasSubstr("<failure")));
}

TEST_P(VerdictsTest, CollectiveAssertionsPassWhenTheRanksAgree) {
  Verdict v = Run("Verdicts.AllEqAgrees/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

TEST_P(VerdictsTest, DisagreeingRanksAllFailWithOneTableGroupedByValue) {
  Verdict v = Run("Verdicts.AllEqDisagrees/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  // Every rank fails with the same table: printed once, for all four.
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-all-eq", "[ranks 0-3 of 4]") +
                        "DIST_EXPECT_ALL_EQ(rank() == 1 ? 43 : 42): the 4 "
                        "ranks disagree:\n  42: ranks 0, 2, 3\n  43: rank 1"));
  EXPECT_EQ(Count(v.run.out, "disagree:\n  42: ranks 0, 2, 3"), 1) << v.run.out;
}

// The _ON forms work on any communicator, here one a test without comm()
// made itself; the table names it.
TEST_P(VerdictsTest, CollectiveAssertionsWorkOnTheTestsOwnCommunicator) {
  Verdict v = Run("VerdictsNoComm.AssertsOnItsOwnCommunicator/3ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-all-eq-on", "[ranks 0-2 of 3]") +
                        "DIST_EXPECT_ALL_EQ_ON(rank() == 2 ? 7 : 6): the 3 "
                        "ranks of communicator \"mine\" disagree:\n  6: "
                        "ranks 0, 1\n  7: rank 2"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-all-true-on", "[ranks 0-2 of 3]") +
                        "DIST_ASSERT_ALL_TRUE_ON(rank() != 0) is false on "
                        "rank 0 of the 3 ranks of communicator \"mine\""))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-after-assert-on")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("was killed by disttest")));
}

TEST_P(VerdictsTest, FatalCollectiveAssertionReturnsOnEveryRankTogether) {
  Verdict v = Run("Verdicts.AssertAllTrueReturnsTogether/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-all-true", "[ranks 0-3 of 4]") +
                        "DIST_ASSERT_ALL_TRUE(rank() % 2 == 0) is false on "
                        "ranks 1, 3 of 4"));
  // Every rank returned at the assertion: none ran on, none was left waiting.
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-after-assert")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("was killed by disttest")));
}

TEST_P(VerdictsTest, LogDirKeepsEachRanksOutputAndShowsTheFailingTail) {
  std::string dir = TempPath(".logs");
  Verdict pass =
      Run("Verdicts.PrintsLines/2ranks", {{"DISTTEST_LOG_DIR", dir}});
  EXPECT_EQ(pass.run.exit_code, 0) << pass.run.out;
  for (int r = 0; r < 2; ++r) {
    std::string log = ReadFile(dir + "/Verdicts.PrintsLines/2ranks/rank-" +
                               std::to_string(r) + ".log");
    std::string rs = std::to_string(r);
    EXPECT_THAT(log, HasSubstr("marker-stdout from rank " + rs + "\n"));
    EXPECT_THAT(log, HasSubstr("marker-stderr from rank " + rs + "\n"));
  }
  EXPECT_THAT(pass.run.out, Not(HasSubstr("the last")));
  Verdict fail =
      Run("Verdicts.FailsOnRank1Only/2ranks", {{"DISTTEST_LOG_DIR", dir}});
  EXPECT_EQ(fail.run.exit_code, 1);
  std::string rank1_log = dir + "/Verdicts.FailsOnRank1Only/2ranks/rank-1.log";
  EXPECT_THAT(fail.run.out,
              HasSubstr("[ disttest ] the last 1 lines of rank 1's output (all "
                        "of it: " +
                        rank1_log + "):\n  marker-rank-output 1\n"));
  EXPECT_THAT(fail.run.out, Not(HasSubstr("of rank 0's output")));
  std::filesystem::remove_all(dir);
}

TEST_P(VerdictsTest, LongTestPrintsWhoHasFinished) {
  Verdict v = Run("Verdicts.SlowRank/2ranks", {{"DISTTEST_HEARTBEAT", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // Rank 1 sleeps 2.5 s: a heartbeat (each second) finds rank 0 done and
  // rank 1 running, whenever rank 0 finished.
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex("\\[ disttest \\] Verdicts.SlowRank/"
                                       "2ranks: [12] s; finished: 0; "
                                       "running: 1\n"));
}

TEST_P(VerdictsTest, XmlHoldsEachRanksFailureAndTheTestsProperties) {
  Verdict v = Run("Verdicts.AllEqDisagrees/4ranks");
  std::string tc = TestCaseXml(v.xml, "AllEqDisagrees/4ranks");
  // The four ranks' identical failures are one <failure> naming them all,
  // at the assertion's line.
  EXPECT_EQ(Count(tc, "<failure message="), 1) << tc;
  EXPECT_THAT(tc, HasSubstr("verdicts_child_.cc:" +
                            std::to_string(LineOf("marker-all-eq")) +
                            "&#x0A;[ranks 0-3 of 4] DIST_EXPECT_ALL_EQ"));
  EXPECT_THAT(
      tc, HasSubstr("<property name=\"disttest_world_size\" value=\"4\"/>"));
  EXPECT_THAT(
      tc, HasSubstr("<property name=\"disttest_backend\" value=\"gloo\"/>"));
  EXPECT_THAT(
      tc, HasSubstr(std::string("<property name=\"disttest_launch\" value=\"") +
                    GetParam().launch + "\"/>"));
  EXPECT_THAT(tc, HasSubstr("<property name=\"disttest_rerun\" value=\""));
}

// --gtest_output=json holds what the XML holds: each rank's properties and
// the failures with their ranks.
TEST_P(VerdictsTest, JsonOutputHasEveryRanksDetail) {
  const std::string path = TempPath(".json");
  std::vector<std::string> args = {
      GetParam().binary,
      "--gtest_filter=Verdicts.RecordsProperties/3ranks:Verdicts."
      "AllEqDisagrees/4ranks",
      "--gtest_output=json:" + path};
  if (*GetParam().extra_arg != '\0')
    args.push_back(GetParam().extra_arg);
  ChildRun run = RunChild(args, {{"VERDICTS_LAUNCH", GetParam().launch}},
                          std::chrono::seconds(60));
  EXPECT_EQ(run.exit_code, 1) << run.out;
  nlohmann::json json = nlohmann::json::parse(ReadFile(path));
  std::filesystem::remove(path);
  std::map<std::string, nlohmann::json> tests;
  for (const auto &suite : json["testsuites"]) {
    for (const auto &test : suite["testsuite"])
      tests[test["name"]] = test;
  }
  const nlohmann::json &props = tests["RecordsProperties/3ranks"];
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(props.value(fmt::format("rank{}.marker-key", r), ""),
              std::to_string(r))
        << props.dump(1);
  }
  EXPECT_EQ(props.value("rank1.marker-only-rank1", ""), "yes");
  EXPECT_EQ(props.value("disttest_world_size", ""), "3");
  const nlohmann::json &failed = tests["AllEqDisagrees/4ranks"];
  ASSERT_EQ(failed["failures"].size(), 1u) << failed.dump(1);
  EXPECT_THAT(failed["failures"][0]["failure"].get<std::string>(),
              HasSubstr("[ranks 0-3 of 4] DIST_EXPECT_ALL_EQ(rank() == 1 ? 43 "
                        ": 42): the 4 ranks disagree:"));
  EXPECT_THAT(failed.value("disttest_rerun", ""),
              HasSubstr("--gtest_filter=Verdicts.AllEqDisagrees/4ranks"));
}

// --gtest_fail_fast stops after the first failing distributed test as after
// a plain one: the rest are skipped, their ranks never started.
TEST_P(VerdictsTest, FailFastStopsAfterTheFirstFailingDistributedTest) {
  Verdict v =
      Run("Verdicts.FailsOnRank1Only/2ranks:Verdicts.PrintsLines/2ranks",
          {{"GTEST_FAIL_FAST", "1"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Verdicts.FailsOnRank1Only/"
                                   "2ranks"));
  EXPECT_THAT(v.run.out, HasSubstr("[  SKIPPED ] Verdicts.PrintsLines/2ranks"));
  EXPECT_THAT(v.run.out + v.run.err, Not(HasSubstr("marker-stdout from rank")));
}

// RecordProperty() in a rank reaches the parent's XML, per rank; a pooled
// rank records into the test it runs, not into the one it started with.
TEST_P(VerdictsTest, PropertiesARankRecordsReachTheXmlPerRank) {
  Verdict v = Run("Verdicts.RecordsProperties/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  std::string tc = TestCaseXml(v.xml, "RecordsProperties/3ranks");
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(
        tc, HasSubstr(fmt::format(
                "<property name=\"rank{}.marker-key\" value=\"{}\"/>", r, r)))
        << tc;
  }
  EXPECT_THAT(tc, HasSubstr("<property name=\"rank1.marker-only-rank1\" "
                            "value=\"yes\"/>"));
  EXPECT_THAT(tc, Not(HasSubstr("rank0.marker-only-rank1")));
  Verdict pooled = Run("VerdictsPooledDaemon.*:VerdictsPooledAgain.*");
  EXPECT_EQ(pooled.run.exit_code, 0) << pooled.run.out << pooled.run.err;
  // A property is the test's: the pool goes on with the same ranks.
  if (std::string(GetParam().launch) == "fork") {
    auto tests = PoolLines(pooled.run.out, 1);
    EXPECT_EQ(tests["AfterTheDeathTest"],
              std::make_pair(tests["AfterTheDaemon"].first, 3));
  }
  EXPECT_THAT(
      TestCaseXml(pooled.xml, "AfterTheDaemon/2ranks"),
      HasSubstr("<property name=\"rank1.marker-pooled\" value=\"1\"/>"));
  EXPECT_THAT(TestCaseXml(pooled.xml, "StartsADaemon/2ranks"),
              Not(HasSubstr("marker-pooled")));
}

// The rerun line keeps the DISTTEST_* variables that shaped the run.
TEST_P(VerdictsTest, RerunKeepsTheRunsDisttestVariables) {
  Verdict v =
      Run("Verdicts.FailsOnRank1Only/2ranks",
          {{"DISTTEST_NO_HOST_ARENA", "1"}, {"DISTTEST_TIMEOUT", "45"}});
  EXPECT_EQ(v.run.exit_code, 1);
  std::string user_args =
      *GetParam().extra_arg ? std::string(GetParam().extra_arg) + " " : "";
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string("rerun this test alone: "
                                    "DISTTEST_NO_HOST_ARENA=1 "
                                    "DISTTEST_TIMEOUT=45 ") +
                        GetParam().binary + " " + user_args +
                        "--gtest_filter=Verdicts.FailsOnRank1Only/2ranks\n"));
}

TEST_P(VerdictsTest, TestWithoutCommunicatorBuildsItsOwnFromTheStore) {
  Verdict v = Run("VerdictsNoComm.BuildsItsOwnCommunicator/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out, HasSubstr("[rank " + std::to_string(r) +
                                     "] marker-own-communicator 6 gloo\n"));
  }
}

TEST_P(VerdictsTest, ParallelLayoutThatDoesNotFitIsSkippedSayingWhy) {
  Verdict v = Run("VerdictsParallel.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(TestCaseXml(v.xml, "TensorGroupsOfTwo/2ranks"),
              HasSubstr("result=\"completed\""));
  EXPECT_THAT(TestCaseXml(v.xml, "TensorGroupsOfTwo/3ranks"),
              HasSubstr("result=\"skipped\""));
  EXPECT_THAT(v.run.out,
              HasSubstr("options().parallel does not fit 3 ranks: world size "
                        "3 does not split into pipeline 1 x tensor 2 (= 2)"));
}

// A temporary directory for the child's TMPDIR, which must be empty again
// when the child is done.
class ScratchTmp {
public:
  ScratchTmp() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "verdicts-tmp-XXXXXX")
            .string();
    EXPECT_NE(mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~ScratchTmp() { std::filesystem::remove_all(path_); }
  const std::string &path() const { return path_; }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(path_)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

private:
  std::string path_;
};

TEST_P(VerdictsTest, DistributedFixtureRunsFirstAndItsDirectoryGoes) {
  ScratchTmp tmp;
  Verdict v = Run("VerdictsWithFixture.*:VerdictsFaultyFixture.*",
                  {{"TMPDIR", tmp.path()}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  // The test's ranks read what the fixture's 2 ranks wrote, at 1 and 3
  // ranks; its output is labelled with the fixture's name.
  EXPECT_THAT(v.run.out, HasSubstr("[WritesShards rank 1] "
                                   "marker-fixture-output 1\n"));
  EXPECT_THAT(v.run.out, HasSubstr("[rank 0] marker-body-after-fixtures 0\n"));
  for (const char *name :
       {"ReadsWhatTheFixtureWrote/1ranks", "ReadsWhatTheFixtureWrote/3ranks",
        "BodyRunsAfterBothFixtures/2ranks"}) {
    EXPECT_THAT(TestCaseXml(v.xml, name), HasSubstr("result=\"completed\""))
        << name;
  }
  EXPECT_THAT(v.run.out, Not(HasSubstr("FAILED")));
  EXPECT_THAT(tmp.Entries(), ::testing::IsEmpty());
}

TEST_P(VerdictsTest, FailingDistributedFixtureFailsTheTestWithoutItsBody) {
  ScratchTmp tmp;
  Verdict v = Run("VerdictsFaultyFixture.BodyRunsAfterBothFixtures/2ranks",
                  {{"TMPDIR", tmp.path()}, {"VERDICTS_FIXTURE_FAULT", "fail"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr(FailureAt("marker-fixture-fails",
                                             "[FaultyFixture rank 2/3]")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("[FaultyFixture rank 1/3]")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-body-after-fixtures")));
  EXPECT_THAT(v.run.out, HasSubstr("rerun this test alone: "));
  EXPECT_THAT(tmp.Entries(), ::testing::IsEmpty());
}

TEST_P(VerdictsTest, SkippingDistributedFixtureSkipsTheTest) {
  ScratchTmp tmp;
  Verdict v = Run("VerdictsFaultyFixture.BodyRunsAfterBothFixtures/2ranks",
                  {{"TMPDIR", tmp.path()}, {"VERDICTS_FIXTURE_FAULT", "skip"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("FaultyFixture: all 3 ranks skipped: "
                                   "marker-fixture-skips"));
  EXPECT_THAT(TestCaseXml(v.xml, "BodyRunsAfterBothFixtures/2ranks"),
              HasSubstr("result=\"skipped\""));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-body-after-fixtures")));
  EXPECT_THAT(tmp.Entries(), ::testing::IsEmpty());
}

// --- GPUs, with DISTTEST_GPUS and CTest's variables standing in for a GPU
// machine and a resource spec file. ---

using Env = std::vector<std::pair<std::string, std::string>>;

// CTest's variables for one group per rank, e.g. {"3", "0;2"} (rank 1 gets
// ids 0 and 2).
Env CtestGroups(const std::vector<std::string> &groups) {
  Env env{{"CTEST_RESOURCE_GROUP_COUNT", std::to_string(groups.size())}};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::string name = "CTEST_RESOURCE_GROUP_" + std::to_string(i);
    env.emplace_back(name, "gpus");
    std::string entries;
    std::stringstream ids(groups[i]);
    for (std::string id; std::getline(ids, id, ';');) {
      entries +=
          (entries.empty() ? "" : ";") + std::string("id:") + id + ",slots:1";
    }
    env.emplace_back(name + "_GPUS", entries);
  }
  return env;
}

Env Plus(Env a, const Env &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string DevicesLine(int rank, const std::string &devices) {
  return "[rank " + std::to_string(rank) + "] marker-devices " + devices + "\n";
}

TEST_P(VerdictsTest, EachRankSeesOnlyItsOwnGpus) {
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c,GPU-d"},
                   {"VERDICTS_GPUS_PER_RANK", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "GPU-a")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "GPU-b")));
  EXPECT_THAT(
      TestCaseXml(v.xml, "ShowsItsDevices/2ranks"),
      HasSubstr("<property name=\"disttest_gpus\" value=\"rank 0: GPU-a, "
                "rank 1: GPU-b (DISTTEST_GPUS)\"/>"));
}

TEST_P(VerdictsTest, TwoGpusPerRankAllRotated) {
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"DISTTEST_GPUS", "4"},
                   {"VERDICTS_GPUS_PER_RANK", "2"},
                   {"VERDICTS_ALL_ROTATED", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "0,1,2,3")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "2,3,0,1")));
}

TEST_P(VerdictsTest, GlooRanksWithoutGpusKeepTheInheritedDevices) {
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"CUDA_VISIBLE_DEVICES", "5,6"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "5,6")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "5,6")));
}

TEST_P(VerdictsTest, CtestResourceGroupsGiveEachRankItsIds) {
  // A fake resource spec: ctest gave rank 0 the 4th GPU of the inherited
  // list and rank 1 the 2nd.
  const Env gpus{{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c,GPU-d"}};
  Verdict one = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                    Plus(Plus(gpus, CtestGroups({"3", "1"})),
                         {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out << one.run.err;
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(0, "GPU-d")));
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(1, "GPU-b")));
  // Two GPUs a rank: every id of the group is kept, in order.
  Verdict two = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                    Plus(Plus(gpus, CtestGroups({"3;0", "2;1"})),
                         {{"VERDICTS_GPUS_PER_RANK", "2"}}));
  EXPECT_EQ(two.run.exit_code, 0) << two.run.out << two.run.err;
  EXPECT_THAT(two.run.out, HasSubstr(DevicesLine(0, "GPU-d,GPU-a")));
  EXPECT_THAT(two.run.out, HasSubstr(DevicesLine(1, "GPU-c,GPU-b")));
  // All rotated: the others follow, after the rank's own.
  Verdict rotated = Run(
      "VerdictsGpus.ShowsItsDevices/2ranks",
      Plus(Plus(gpus, CtestGroups({"3", "1"})),
           {{"VERDICTS_GPUS_PER_RANK", "1"}, {"VERDICTS_ALL_ROTATED", "1"}}));
  EXPECT_THAT(rotated.run.out,
              HasSubstr(DevicesLine(0, "GPU-d,GPU-a,GPU-b,GPU-c")));
  EXPECT_THAT(rotated.run.out,
              HasSubstr(DevicesLine(1, "GPU-b,GPU-c,GPU-d,GPU-a")));
}

TEST_P(VerdictsTest, CtestGroupsOnOneGpuAreAClearFailure) {
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "2"}}, CtestGroups({"1", "1"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("CTest gave GPU 1 to rank 0 and rank 1"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-devices")));
}

TEST_P(VerdictsTest, FailureNamesTheGpusAndTheRerunKeepsThem) {
  Verdict v = Run("VerdictsGpus.FailsOnRank1/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c"}},
                            CtestGroups({"2", "0"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-gpu-failure", "[rank 1/2]")));
  EXPECT_THAT(v.run.out, HasSubstr("[ disttest ] GPUs: rank 0: GPU-c, rank 1: "
                                   "GPU-a (CTest resource groups)\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string("rerun this test alone: ") +
                        "DISTTEST_GPUS=GPU-c,GPU-a " + GetParam().binary));
}

TEST_P(VerdictsTest, RerunOfOneNumericGpuNamesItAsAList) {
  // "DISTTEST_GPUS=3" would be a count of three; "3," is GPU 3.
  Verdict v = Run("VerdictsGpus.FailsOnRank1/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "4"}}, CtestGroups({"3", "1"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_THAT(v.run.out,
              HasSubstr("rerun this test alone: DISTTEST_GPUS=3,1 "));
  Verdict one = Run("VerdictsGpus.ShowsItsDevices/1ranks",
                    Plus(Plus({{"DISTTEST_GPUS", "3,"}}, CtestGroups({"0"})),
                         {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out << one.run.err;
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(0, "3")));
}

TEST_P(VerdictsTest, TooFewGpusSkipsSayingHowMany) {
  Verdict v =
      Run("VerdictsNccl.NeedsAGpuPerRank/2ranks", {{"DISTTEST_GPUS", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(TestCaseXml(v.xml, "NeedsAGpuPerRank/2ranks"),
              HasSubstr("result=\"skipped\""));
  EXPECT_THAT(v.run.out, HasSubstr("needs 2 GPUs, found 1: 0 (DISTTEST_GPUS)"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-nccl-body")));
}

TEST_P(VerdictsTest, RequiredGpusMakeTooFewAFailure) {
  Verdict v = Run("VerdictsNccl.NeedsAGpuPerRank/2ranks",
                  {{"DISTTEST_GPUS", "0"}, {"DISTTEST_REQUIRE_GPUS", "1"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("needs 2 GPUs, found 0 (DISTTEST_GPUS) "
                        "(DISTTEST_REQUIRE_GPUS=1 makes this a failure)"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-nccl-body")));
}

TEST_P(VerdictsTest, AutoWithoutGpusRunsOnGloo) {
  Verdict v =
      Run("VerdictsAuto.ChoosesTheBackend/2ranks", {{"DISTTEST_GPUS", "0"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1] marker-backend gloo\n"));
  EXPECT_THAT(
      TestCaseXml(v.xml, "ChoosesTheBackend/2ranks"),
      HasSubstr("<property name=\"disttest_backend\" value=\"gloo\"/>"));
}

// --- Pooled ranks (options().reuse_workers) ---

// "[rank 0] marker-pool First pid 123 count 1" -> {pid, count}, per test.
std::map<std::string, std::pair<int, int>> PoolLines(const std::string &out,
                                                     int rank) {
  std::map<std::string, std::pair<int, int>> found;
  std::istringstream in(out);
  const std::string prefix = "[rank " + std::to_string(rank) + "] marker-pool ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0)
      continue;
    std::istringstream fields(line.substr(prefix.size()));
    std::string test, pid_word, count_word;
    int pid = 0, count = 0;
    fields >> test >> pid_word >> pid >> count_word >> count;
    found[test] = {pid, count};
  }
  return found;
}

TEST_P(VerdictsTest, DaemonStartedByAPooledRankEndsWithItsTest) {
  Verdict v = Run("VerdictsPooledDaemon.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.err, ::testing::ContainsRegex(
                             "\\[rank 1\\] disttest: note: ended process "
                             "[0-9]+ \\(sleep 1000\\)"));
  // Ended with its test, not when the pool ends: the next test on the same
  // rank finds no child left.
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1] marker-no-children\n"));
  auto tests = PoolLines(v.run.out, 1);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["AfterTheDaemon"].first, tests["StartsADaemon"].first);
  }
}

TEST_P(VerdictsTest, PooledRanksRunTheNextTestUntilOneFails) {
  Verdict v = Run("VerdictsPooled.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-pool-failure", "[rank 1/2]")));
  for (int r = 0; r < 2; ++r) {
    auto tests = PoolLines(v.run.out, r);
    ASSERT_EQ(tests.size(), 8u) << v.run.out;
    if (std::string(GetParam().launch) == "exec") {
      // kExec ranks are started for each test.
      for (const auto &[test, process] : tests) {
        EXPECT_EQ(process.second, 1) << test;
      }
      continue;
    }
    // The same processes ran the first three tests, one after another...
    EXPECT_EQ(tests["First"].second, 1);
    EXPECT_EQ(tests["Second"], std::make_pair(tests["First"].first, 2));
    EXPECT_EQ(tests["FailsOnRank1"], std::make_pair(tests["First"].first, 3));
    // ...and the failure ended them: the next test has fresh ones.
    EXPECT_NE(tests["AfterTheFailure"].first, tests["First"].first);
    EXPECT_EQ(tests["AfterTheFailure"].second, 1);
  }
  if (std::string(GetParam().launch) == "fork") {
    // The failure on reused ranks says so, and how to rerun it both ways.
    std::string user_args =
        *GetParam().extra_arg ? std::string(GetParam().extra_arg) + " " : "";
    EXPECT_THAT(
        v.run.out,
        HasSubstr("[ disttest ] this test ran on reused ranks "
                  "(options().reuse_workers), after 2 other tests on them: "
                  "VerdictsPooled.First/2ranks, VerdictsPooled.Second/2ranks\n"
                  "[ disttest ] rerun it on fresh ranks: DISTTEST_NO_REUSE=1 " +
                  std::string(GetParam().binary) + " " + user_args +
                  "--gtest_filter=VerdictsPooled.FailsOnRank1/2ranks\n"
                  "[ disttest ] rerun it after the same tests on the same "
                  "ranks: " +
                  GetParam().binary + " " + user_args +
                  "--gtest_filter=VerdictsPooled.First/2ranks:VerdictsPooled."
                  "Second/2ranks:VerdictsPooled.FailsOnRank1/2ranks\n"));
  }
  EXPECT_THAT(TestCaseXml(v.xml, "AfterTheFailure/2ranks"),
              HasSubstr("result=\"completed\""));
}

// The pool's fast path (ranks and communicator reused, the communicator
// parked between tests) checks what a fresh test's ranks check: ranks that
// disagree about a collective all fail, through the arena and through Gloo.
TEST_P(VerdictsTest, PooledRanksThatDisagreeFail) {
  const std::string calls =
      "does not match across the 2 ranks: rank 0: allreduce(8 x float32, "
      "sum); rank 1: broadcast(8 x float32, root 0)";
  for (const char *no_arena : {"0", "1"}) {
    SCOPED_TRACE(std::string("DISTTEST_NO_HOST_ARENA=") + no_arena);
    Verdict v =
        Run("VerdictsPooledMismatch.*", {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 1);
    EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
    EXPECT_THAT(v.run.out, Not(HasSubstr("marker-pooled-mismatch-passed")));
    EXPECT_THAT(v.run.out, Not(HasSubstr("was killed by disttest")));
    EXPECT_THAT(TestCaseXml(v.xml, "Agrees/2ranks"),
                Not(HasSubstr("<failure")));
    // Which rank is marked as the first failure depends on timing (both
    // fail at the same collective, one perhaps 10 ms after the other).
    std::string tc = TestCaseXml(v.xml, "Disagrees/2ranks");
    for (std::size_t at;
         (at = tc.find("(first failure) ")) != std::string::npos;) {
      tc.erase(at, std::string("(first failure) ").size());
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_THAT(tc,
                  HasSubstr(fmt::format(
                      "[rank {}/2] the test body threw disttest::CommError: "
                      "[rank {}/2] ",
                      r, r)));
    }
    EXPECT_EQ(Count(tc, calls), 2 * 2) << tc;
    if (std::string(GetParam().launch) == "fork") {
      // Through the reused ranks: the second test ran in the first's
      // processes.
      for (int r = 0; r < 2; ++r) {
        auto tests = PoolLines(v.run.out, r);
        EXPECT_EQ(tests["Disagrees"], std::make_pair(tests["Agrees"].first, 2))
            << v.run.out;
      }
    }
  }
}

TEST_P(VerdictsTest, PooledRankKilledEndsThePool) {
  Verdict v =
      Run("VerdictsPooled.AfterTheFailure/*:VerdictsPooled.KilledOnRank0/"
          "*:VerdictsPooled.AfterTheKill/*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_EQ(RanksNaming(v.run.out, "killed by signal 9 (SIGKILL)"),
            std::set<int>{0})
      << v.run.out;
  auto tests = PoolLines(v.run.out, 1);
  ASSERT_EQ(tests.size(), 3u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["KilledOnRank0"],
              std::make_pair(tests["AfterTheFailure"].first, 2));
    EXPECT_EQ(tests["AfterTheKill"].second, 1);
  }
  EXPECT_THAT(TestCaseXml(v.xml, "AfterTheKill/2ranks"),
              HasSubstr("result=\"completed\""));
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
}

TEST_P(VerdictsTest, PooledPartialSkipFailsAndEndsThePool) {
  Verdict v = Run("VerdictsPooled.AfterTheKill/*:VerdictsPooled.SkipsOnRank1/"
                  "*:VerdictsPooled.AfterThePartialSkip/*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("rank 1 of 2 skipped (\"marker-pool-skip"));
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 3u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["SkipsOnRank1"].second, 2);
    EXPECT_EQ(tests["AfterThePartialSkip"].second, 1);
  }
}

TEST_P(VerdictsTest, DeathTestChildLeavesThePoolsAlone) {
  Verdict v = Run("VerdictsPooled.AfterTheKill/*:VerdictsPoolsAndDeathTests.*:"
                  "VerdictsPooledAgain.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["AfterTheDeathTest"],
              std::make_pair(tests["AfterTheKill"].first, 2));
  }
}

TEST_P(VerdictsTest, CaughtCommunicatorFailureEndsThePool) {
  Verdict v = Run("VerdictsPooledShort.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  EXPECT_EQ(tests["AfterTheCaughtFailure"].second, 1);
  EXPECT_NE(tests["AfterTheCaughtFailure"].first,
            tests["CatchesAFailedRecv"].first);
}

TEST_P(VerdictsTest, NoReuseStartsRanksForEveryTest) {
  Verdict v = Run("VerdictsPooled.First/*:VerdictsPooled.Second/*",
                  {{"DISTTEST_NO_REUSE", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  EXPECT_EQ(tests["First"].second, 1);
  EXPECT_EQ(tests["Second"].second, 1);
  EXPECT_NE(tests["First"].first, tests["Second"].first);
}

// kExec ranks are forks of the zygote: the placeholder filter in their
// command line, the test process their parent, the parent's working
// directory of the moment (it moved after the zygote started), their own
// rank's environment. DISTTEST_NO_ZYGOTE=1 execs each rank.
TEST_P(VerdictsTest, ExecRanksAreForksOfTheZygote) {
  if (std::string(GetParam().launch) != "exec")
    GTEST_SKIP() << "kExec only";
  const std::string filter = "Verdicts.ShowsWhereItCameFrom/2ranks:"
                             "VerdictsElsewhere.ShowsWhereItCameFrom/2ranks";
  Verdict v = Run(filter);
  ASSERT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  const std::string cwd = std::filesystem::current_path().string();
  for (int r : {0, 1}) {
    const std::string rs = std::to_string(r);
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("marker-origin rank {} ppid {} cwd {} "
                                      "rank-env {} cmdline ",
                                      r, v.run.pid, cwd, r)));
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format(
                    "marker-elsewhere rank {} ppid {} cwd /\n", r, v.run.pid)));
  }
  EXPECT_THAT(v.run.out, HasSubstr("--gtest_filter=disttest-zygote "));
  EXPECT_THAT(v.run.out, Not(HasSubstr("zygote failed")));

  Verdict execd = Run(filter, {{"DISTTEST_NO_ZYGOTE", "1"}});
  ASSERT_EQ(execd.run.exit_code, 0) << execd.run.out << execd.run.err;
  EXPECT_THAT(execd.run.out, Not(HasSubstr("disttest-zygote")));
  EXPECT_THAT(
      execd.run.out,
      HasSubstr("--gtest_filter=Verdicts.ShowsWhereItCameFrom/2ranks "));
}

// A zygote killed between tests: the next kExec test execs its ranks, says
// so once, and passes; nothing is left behind (Run checks).
TEST_P(VerdictsTest, KilledZygoteMeansRanksAreExecd) {
  if (std::string(GetParam().launch) != "exec")
    GTEST_SKIP() << "kExec only";
  Verdict v = Run("Verdicts.Passes/2ranks:Verdicts.KillsTheZygote/1ranks:"
                  "Verdicts.SixteenRanks/16ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr("marker-zygote-killed"));
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "\\[ disttest \\] note: the kExec zygote failed \\(.+\\); "
                  "ranks are exec'd one by one from now on\n"));
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 3 tests."));
}

// A zygote that forked a rank and ended before it sent the rank's pid: that
// rank never runs (it would be a second copy of the one exec'd in its
// place); the test passes with every rank once. The unseen one exits by
// itself, and nothing outlives the test binary (Run checks).
TEST_P(VerdictsTest, ZygoteGoneBeforeItAnswersStartsNoRankTwice) {
  if (std::string(GetParam().launch) != "exec")
    GTEST_SKIP() << "kExec only";
  Verdict v = Run("VerdictsElsewhere.ShowsWhereItCameFrom/2ranks",
                  {{"DISTTEST_INTERNAL_ZYGOTE_DIE_BEFORE_ANSWER", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: the kExec zygote failed (it "
                        "ended); ranks are exec'd one by one from now on\n"));
  for (const char *rank :
       {"marker-elsewhere rank 0 ", "marker-elsewhere rank 1 "}) {
    EXPECT_EQ(Count(v.run.out, rank), 1) << rank << "\n" << v.run.out;
  }
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 1 test."));
}

// A receive from a rank whose body has returned fails at once, naming it,
// not at the test's timeout (60 s here).
TEST_P(VerdictsTest, RecvFromARankThatReturnedFailsAtOnce) {
  Verdict v = Run("Verdicts.RecvFromARankThatReturned/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] recv of 1 int32 from rank 0 (tag 0) "
                        "failed: rank 0 returned from its body while this rank "
                        "waited for it to send it"));
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(10));
}

// A rank that stopped after a collective: its peers' next collective times
// out naming it and what it did last, and that is the first failure.
TEST_P(VerdictsTest, TimedOutCollectiveSaysWhatTheMissingRankDidLast) {
  Verdict v = Run("VerdictsShortTimeout.StopsAfterABroadcast/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  const std::string text =
      "timed out after 1500 ms waiting for rank 2 (same-host arena): rank 2's "
      "last collective was #1 broadcast(16 x int32, root 0)";
  // The first to time out say so (the others may see one of them give up
  // first), and that is the first failure.
  const std::set<int> timed_out = RanksNaming(v.run.out, text);
  EXPECT_FALSE(timed_out.empty()) << v.run.out;
  for (int r : timed_out)
    EXPECT_NE(r, 2) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("(first failure) the test body threw "
                                   "disttest::CommError: "))
      << v.run.out;
  const std::size_t first = v.run.out.find("(first failure)");
  ASSERT_NE(first, std::string::npos) << v.run.out;
  EXPECT_THAT(v.run.out.substr(first, v.run.out.find('\n', first) - first),
              HasSubstr(text))
      << v.run.out;
  EXPECT_EQ(RanksNaming(v.run.out, "the test body threw disttest::CommError: "),
            (std::set<int>{0, 1, 3}))
      << v.run.out;
  // Ended by the failure grace, not at the test's deadline.
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 2/4] was killed by disttest: still running "
                        "300 ms after rank "));
  // The verdict starts with the ledger's paragraph: which collective, who
  // is in it (and where they called it), who is not and where it is.
  const std::string at = "verdicts_child_.cc:";
  const std::string paragraph = fmt::format(
      "verdicts_child_.cc:{}: Failure\n"
      "collective #2 on the world communicator never completed:\n"
      "  ranks 0-1, 3 (3 ranks) failed in allreduce(8 x float32, sum) at {}{} "
      "after 1.",
      LineOf("marker-stops-after-broadcast") - 3, at,
      LineOf("marker-stops-after-broadcast") + 4);
  EXPECT_THAT(v.run.out, HasSubstr(paragraph)) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format(
                  "  rank 2 is not in it: its last collective, #1 broadcast(16 "
                  "x int32, root 0) at {}{}, completed ",
                  at, LineOf("marker-stops-after-broadcast") - 1)));
  EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                             "s ago; it is now at {}{} (stack below)", at,
                             LineOf("marker-stops-after-broadcast"))));
  EXPECT_LT(v.run.out.find(paragraph), first) << v.run.out;
  // Streamed before the kill, as the verdict says it.
  EXPECT_THAT(
      v.run.out,
      HasSubstr("[ disttest ] VerdictsShortTimeout.StopsAfterABroadcast/"
                "4ranks: collective #2 on the world communicator never "
                "completed:\n"));
}

// A rank that never comes to the test's first collective: the others'
// call, and where the missing one is instead.
TEST_P(VerdictsTest, HangReportNamesTheRankThatNeverCame) {
  Verdict v = Run("VerdictsShortTimeout.OneRankNeverComes/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format(
                  "collective #1 on the world communicator never completed:\n"
                  "  ranks 0-1, 3 (3 ranks) failed in allreduce(8 x float32, "
                  "sum) at verdicts_child_.cc:{} after 1.",
                  LineOf("marker-waits-for-2"))))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format(
                  "  rank 2 is not in it: its last collective, #0 barrier() "
                  "(disttest's, before the body), completed ")));
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format(
                  "s ago; it is now at verdicts_child_.cc:{} (stack below)",
                  LineOf("marker-never-comes"))));
  // The others' allreduce gives up at 1.5 s, rank 2 is ended 300 ms
  // later (the failure grace), its stack taken; far inside the bound.
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(3 + 15));
}

// A rank that returned from its body while the others called one more
// collective: they fail at once, and the paragraph says it had left.
TEST_P(VerdictsTest, HangReportNamesTheRankThatLeftItsBody) {
  Verdict v = Run("VerdictsShortTimeout.OneRankLeavesWhileOthersWait/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(fmt::format(
                  "collective #1 on the world communicator never completed:\n"
                  "  ranks 0-1, 3 (3 ranks) failed in allreduce(8 x float32, "
                  "sum) at verdicts_child_.cc:{} after ",
                  LineOf("marker-left-behind"))))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("  rank 2 is not in it: its last collective, #0 "
                        "barrier() (disttest's, before the body), completed "));
  EXPECT_THAT(v.run.out, HasSubstr(" ago; it ended: passed\n"));
  // At once, not at a deadline.
  EXPECT_LT(v.run.elapsed, std::chrono::seconds(2));
}

// Every rank hangs, rank 1 elsewhere: one failure for all of them, then
// their stacks as one tree that parts at the body's two lines; each rank's
// own stack in the XML. The report does not grow with the world.
TEST_P(VerdictsTest, HangOfManyRanksIsOneFailureAndOneTreeOfStacks) {
  // (128 ranks: ranks in the same places share one whole stack, so their
  // stacks take about as long as 4 ranks'.)
  std::size_t lines_at_4 = 0;
  for (int world : {4, 32, 128}) {
    SCOPED_TRACE(fmt::format("{} ranks", world));
    const std::string name = fmt::format("AllHangInTwoPlaces/{}ranks", world);
    Verdict v = Run("VerdictsShortTimeout." + name);
    EXPECT_EQ(v.run.exit_code, 1);
    const std::string all = fmt::format("[ranks 0-{} of {}]", world - 1, world);
    EXPECT_THAT(v.run.out,
                HasSubstr(all + " was killed by disttest: the test timed out "
                                "after 3000 ms; where it was: in the stacks "
                                "below"));
    EXPECT_THAT(v.run.out, HasSubstr(all + " where they were when disttest "
                                           "took their stacks"));
    const std::string at = "verdicts_child_.cc:";
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format("  ranks 0, 2-{}:\n    "
                                                 "RunDistributedBody at ",
                                                 world - 1)));
    EXPECT_THAT(v.run.out,
                HasSubstr(at + std::to_string(LineOf("marker-hang-together"))));
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                               "  rank 1:\n    RunDistributedBody at ")));
    EXPECT_THAT(v.run.out,
                HasSubstr(at + std::to_string(LineOf("marker-hang-apart"))));
    // No collective hangs: the paragraph says so, and where each rank is.
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format(
                    "no collective is incomplete on any communicator; where "
                    "the ranks are:\n  ranks 0, 2-{} ({} ranks) are past "
                    "collective #0 barrier() (disttest's, before the body); "
                    "they are now at {}{} (stack below)\n  rank 1 is past",
                    world - 1, world - 1, at, LineOf("marker-hang-together"))))
        << v.run.out;
    // One line per frame of the tree, not one stack per rank: as long at
    // 128 ranks as at 4.
    EXPECT_LT(Count(v.run.out, "\n"), 120) << v.run.out;
    if (world == 4)
      lines_at_4 = Count(v.run.out, "\n");
    // (Within a few lines: a rank caught outside its sleep under ASan
    // adds a branch.)
    EXPECT_LE(Count(v.run.out, "\n"), lines_at_4 + 4) << v.run.out;
    EXPECT_EQ(Count(v.run.out, "__libc_pause"), 1) << v.run.out;
    const std::string tc = TestCaseXml(v.xml, name);
    for (int r : {0, 1, world - 1}) {
      EXPECT_THAT(tc, HasSubstr(fmt::format(
                          "<property name=\"rank{}.disttest_stack\"", r)));
    }
    // The timeout, the stacks (at most 15 s), the kill and the verdict.
    EXPECT_LT(v.run.elapsed, std::chrono::seconds(3 + 15 + 5));
  }
}

// DISTTEST_TRACE: a Chrome trace event file per test, read back here: a
// track per rank with its phases, every collective with its caller and
// state, and the failures; the failing test prints its path.
// Reused ranks: each test's trace has its own body and collectives, the
// second test's numbered on from the first's.
TEST_P(VerdictsTest, TraceOfPooledTestsHasEachTestsOwnTimeline) {
  const std::string dir = TempPath(".trace");
  Verdict v = Run("VerdictsPooled.First/2ranks:VerdictsPooled.Second/2ranks",
                  {{"DISTTEST_TRACE", dir}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  for (const char *test : {"First", "Second"}) {
    SCOPED_TRACE(test);
    const std::string path =
        fmt::format("{}/VerdictsPooled.{}.2ranks.trace.json", dir, test);
    nlohmann::json trace = nlohmann::json::parse(ReadFile(path));
    std::map<int, std::set<std::string>> spans; // Per rank.
    for (const auto &e : trace["traceEvents"]) {
      if (e["ph"] != "X")
        continue;
      std::string name = e["name"];
      if (e["cat"] == "collective") {
        name += fmt::format(" {}", e["args"]["state"].get<std::string>());
      }
      spans[e["tid"].get<int>()].insert(name);
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(spans[r].count("body"), 1u) << r;
      EXPECT_EQ(spans[r].count("allreduce(1 x int32, sum) completed"), 1u)
          << r << "\n"
          << trace.dump(1);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_P(VerdictsTest, TraceHasEachRanksTimelineItsCollectivesAndItsFailures) {
  const std::string dir = TempPath(".trace");
  Verdict v = Run("VerdictsShortTimeout.StopsAfterABroadcast/4ranks",
                  {{"DISTTEST_TRACE", dir}});
  EXPECT_EQ(v.run.exit_code, 1);
  const std::string path =
      dir + "/VerdictsShortTimeout.StopsAfterABroadcast.4ranks.trace.json";
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] its timeline (Perfetto, chrome://"
                        "tracing): " +
                        path));
  nlohmann::json trace = nlohmann::json::parse(ReadFile(path));
  std::filesystem::remove_all(dir);
  std::map<int, std::set<std::string>> spans; // Per rank.
  std::map<int, int> failures;
  std::set<std::string> threads;
  for (const auto &e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") {
      threads.insert(e["args"]["name"].get<std::string>());
    }
    if (ph == "X") {
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
      std::string name = e["name"];
      if (e["cat"] == "collective") {
        name += fmt::format(" #{} {} {}", e["args"]["number"].get<int>(),
                            e["args"]["called"].get<std::string>(),
                            e["args"]["state"].get<std::string>());
      }
      spans[e["tid"].get<int>()].insert(name);
    }
    if (ph == "i" && e["name"] == "failure")
      ++failures[e["tid"].get<int>()];
  }
  EXPECT_EQ(threads,
            (std::set<std::string>{"rank 0", "rank 1", "rank 2", "rank 3"}));
  const std::string at = "at verdicts_child_.cc:";
  const int line = LineOf("marker-stops-after-broadcast");
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    for (const char *phase : {"start", "connect", "set-up", "body"}) {
      EXPECT_EQ(spans[r].count(phase), 1u) << phase;
    }
    EXPECT_EQ(spans[r].count("barrier() #0 (disttest's, before the body) "
                             "completed"),
              1u);
    EXPECT_EQ(
        spans[r].count(fmt::format(
            "broadcast(16 x int32, root 0) #1 {}{} completed", at, line - 1)),
        1u);
    if (r == 2) {
      EXPECT_EQ(failures[r], 0); // It hung; it did not fail.
      continue;
    }
    EXPECT_EQ(spans[r].count(fmt::format(
                  "allreduce(8 x float32, sum) #2 {}{} failed", at, line + 4)),
              1u);
    EXPECT_EQ(failures[r], 1);
  }
  EXPECT_EQ(trace["otherData"]["test"],
            "VerdictsShortTimeout.StopsAfterABroadcast/4ranks");
}

// --- gtest's grammar: DIST_TEST_P, DIST_TYPED_TEST ---

// A sweep is one gtest test per parameter and world size; a wrong result
// for one parameter at one size fails that test alone, and the filter and
// the rerun command pick it by its name.
TEST_P(VerdictsTest, ParameterizedTestIsOneTestPerParameterAndWorldSize) {
  Verdict v = Run("Counts/VerdictsSweep.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 3 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] 1 test, listed below:\n"
                                   "[  FAILED  ] Counts/VerdictsSweep."
                                   "SumsTheParameter/3ranks/n5, where "
                                   "GetParam() = 5\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-sweep-fails", "[ranks 0-2 of 3]") +
                        "Expected: (sum) != (15), actual: 15 vs 15\n"
                        "marker-sweep-fails at 5\n"));
  // Every rank had the parameter.
  for (const char *line : {"[rank 0] marker-sweep 0 of 2: 1\n",
                           "[rank 1] marker-sweep 1 of 2: 5\n",
                           "[rank 2] marker-sweep 2 of 3: 1\n",
                           "[rank 2] marker-sweep 2 of 3: 5\n"}) {
    EXPECT_THAT(v.run.out, HasSubstr(line));
  }
  EXPECT_THAT(v.run.out,
              HasSubstr("--gtest_filter=Counts/VerdictsSweep.SumsTheParameter/"
                        "3ranks/n5\n"));
  EXPECT_THAT(TestCaseXml(v.xml, "SumsTheParameter/3ranks/n5"),
              HasSubstr("value_param=\"5\""));
  // One test, by its name.
  Verdict one = Run("Counts/VerdictsSweep.SumsTheParameter/2ranks/n5");
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out;
  EXPECT_THAT(one.run.out, HasSubstr("[  PASSED  ] 1 test."));
  EXPECT_THAT(one.run.out, HasSubstr("[rank 1] marker-sweep 1 of 2: 5\n"));
}

// Reused ranks make each parameter's test themselves, from its name.
TEST_P(VerdictsTest, PooledRanksRunEveryParameterOfASweep) {
  Verdict v = Run("Words/VerdictsPooledSweep.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  for (int r = 0; r < 2; ++r) {
    auto tests = PoolLines(v.run.out, r);
    ASSERT_EQ(tests.size(), 3u) << v.run.out;
    if (std::string(GetParam().launch) == "exec")
      continue;
    EXPECT_EQ(tests["Sweep_alpha"].second, 1);
    EXPECT_EQ(tests["Sweep_be"], std::make_pair(tests["Sweep_alpha"].first, 2));
    EXPECT_EQ(tests["Sweep_gamma"],
              std::make_pair(tests["Sweep_alpha"].first, 3));
  }
}

// Parameters that gtest prints alike cannot be told apart by a reused rank:
// the test it cannot make fails saying so (a fresh rank, forked with its
// own test object, runs it rightly).
TEST_P(VerdictsTest, PooledParametersThatPrintAlikeFailRatherThanRunTwice) {
  Verdict v = Run("Close/VerdictsPooledAlike.*");
  if (std::string(GetParam().launch) == "exec") {
    // kExec ranks are started for each test, each with its own parameter.
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    return;
  }
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("a pooled rank could not start Close/"
                        "VerdictsPooledAlike.SeesItsParameter/2ranks/1: 2 "
                        "parameters of VerdictsPooledAlike.SeesItsParameter/"
                        "2ranks print as '1', so a reused rank cannot tell "
                        "which is Close/VerdictsPooledAlike.SeesItsParameter/"
                        "2ranks/1's"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[       OK ] Close/VerdictsPooledAlike."
                                   "SeesItsParameter/2ranks/0"));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Close/VerdictsPooledAlike."
                                   "SeesItsParameter/2ranks/1"));
}

// A typed test is one suite per type, named by the suite's name generator;
// the failing type at the failing size fails alone.
TEST_P(VerdictsTest, TypedTestIsOneSuitePerType) {
  Verdict v = Run("VerdictsTyped/*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 5 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] 1 test, listed below:\n"
                                   "[  FAILED  ] VerdictsTyped/int32."
                                   "SumsInItsType/3ranks, where TypeParam = "
                                   "int\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-typed-fails", "[ranks 0-2 of 3]")));
  for (const char *type : {"float32", "float64"}) {
    EXPECT_THAT(
        v.run.out,
        HasSubstr(fmt::format(
            "[       OK ] VerdictsTyped/{}.SumsInItsType/3ranks", type)));
  }
  EXPECT_THAT(TestCaseXml(v.xml, "SumsInItsType/2ranks"),
              HasSubstr("type_param=\"int\""));
}

TEST_P(VerdictsTest, FullRunLeavesNothingBehind) {
  // Every case at once, failures, crashes and hangs included; Run() checks
  // for leftover queues and processes.
  // One GPU: the NCCL test skips on any machine.
  // (Not the 32- and 128-rank hangs: their stacks take seconds.)
  // About 50 s on two cores, and over 120 s under ASan: the child's
  // deadline scales with the build, inside ctest's 300 s for the test.
  const auto deadline = std::chrono::seconds(static_cast<long long>(
      std::min(120 * std::max(1.0, SlowBuildScale()), 280.0)));
  Verdict v = RunVerdicts(
      GetParam(),
      "*-Verdicts.HangsForSignalTests/*:Close/*:VerdictsShortTimeout."
      "AllHangInTwoPlaces/32ranks:VerdictsShortTimeout.AllHangInTwoPlaces/"
      "128ranks",
      {{"DISTTEST_GPUS", "1"}}, deadline);
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 68 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  SKIPPED ] 6 tests"));
  EXPECT_THAT(v.run.out, HasSubstr("64 FAILED TESTS"));
}

// Over Gloo alone (a communicator the test made: no host arena) a timeout
// names the rank that did not come and what it did last, as the arena does,
// from the ranks' ledgers.
TEST_P(VerdictsTest, TimedOutGlooCollectiveNamesTheMissingRankToo) {
  Verdict v =
      Run("VerdictsNoComm.OwnCommunicatorTimesOutNamingTheMissingRank/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("; by the ranks' ledgers it was waiting for rank 2: "
                        "rank 2's last collective was #0 broadcast(16 x "
                        "int32, root 0)"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("same-host arena"))) << v.run.out;
}

// A rank the test expects to die (ExpectRankToEnd) is killed by a peer
// (SignalRank); its survivors see it gone, in the arena and over Gloo alike,
// and the test passes saying how the rank ended.
TEST_P(VerdictsTest, ExpectedKillOfARankPasses) {
  for (const char *arena : {"0", "1"}) {
    Verdict v = Run("Verdicts.SurvivorsOfAnExpectedKill/4ranks",
                    {{"DISTTEST_NO_HOST_ARENA", arena}});
    EXPECT_EQ(v.run.exit_code, 0) << arena << "\n" << v.run.out;
    EXPECT_THAT(v.run.out,
                HasSubstr("[ disttest ] note: [rank 2/4] killed by signal 9 "
                          "(SIGKILL), as the test expected (ExpectRankToEnd)"))
        << v.run.out;
    for (int r : {0, 1, 3}) {
      EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                                 "[rank {}] marker-survivor {}: ", r, r)))
          << v.run.out;
    }
    EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 2] marker-survivor")));
    EXPECT_THAT(TestCaseXml(v.xml, "SurvivorsOfAnExpectedKill/4ranks"),
                Not(HasSubstr("<failure")));
  }
}

TEST_P(VerdictsTest, ExpectedExitOfARankPasses) {
  Verdict v = Run("Verdicts.ExpectedExitOfARank/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: [rank 1/2] exited with status 3, "
                        "as the test expected (ExpectRankToEnd)"));
}

TEST_P(VerdictsTest, ExpectedEndThatDoesNotComeFails) {
  Verdict v = Run("Verdicts.ExpectedKillThatNeverComes/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              AllOf(HasSubstr("[rank 1/2] was expected to be killed by signal "
                              "9 (SIGKILL) (ExpectRankToEnd in rank "),
                    HasSubstr("), but it finished the test (passed) and "
                              "exited with status 0")))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]"))) << v.run.out;
}

TEST_P(VerdictsTest, OtherEndThanExpectedFailsNamingBoth) {
  Verdict v = Run("Verdicts.RankEndsOtherThanExpected/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              AllOf(HasSubstr("[rank 1/2] was expected to "
                              "exit with status 3 (ExpectRankToEnd in rank "),
                    HasSubstr("), but it was killed by signal 6 (SIGABRT")))
      << v.run.out;
}

TEST_P(VerdictsTest, RankControlMisuseIsNamed) {
  Verdict v = Run("Verdicts.RankControlMisuseIsNamed/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(
      v.run.out,
      AllOf(HasSubstr("marker-misuse 1: SignalRank(5, ...) in rank 0: there "
                      "is no rank 5 in a world of 2 (ranks 0 to 1)"),
            HasSubstr("marker-misuse 2: ExpectRankToEnd(1, "
                      "RankEnd::ExitsWith(81)): statuses 81 to 84 are how "
                      "disttest itself ends a rank"),
            HasSubstr("marker-misuse 3: ExpectRankToEnd(1, "
                      "RankEnd::KilledBy(0)): 0 is no signal"),
            HasSubstr("marker-misuse 4: ExpectRankToEnd(-1, ...) in rank 0: "
                      "there is no rank -1"),
            HasSubstr("marker-misuse 5: no error")))
      << v.run.out;
}

INSTANTIATE_TEST_SUITE_P(
    LaunchModes, VerdictsTest,
    ::testing::Values(ChildSetup{"fork", DISTTEST_VERDICTS_CHILD, "fork", ""},
                      ChildSetup{"exec", DISTTEST_VERDICTS_CHILD, "exec", ""},
                      ChildSetup{"OwnMainFork",
                                 DISTTEST_VERDICTS_OWN_MAIN_CHILD, "fork",
                                 "--user_flag=42"},
                      ChildSetup{"OwnMainExec",
                                 DISTTEST_VERDICTS_OWN_MAIN_CHILD, "exec",
                                 "--user_flag=42"}),
    [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace disttest::testing
