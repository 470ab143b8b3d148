// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Verdicts of ranks that disagree: collectives that differ across the ranks
// (returned, waiting or on a user's communicator), and the collective
// assertions (verdicts.h).
#include "verdicts.h"

namespace disttest::testing {
namespace {

// Ranks that disagree about a collective fail at once, every one of them,
// with one message naming what each rank called: through the host arena,
// through Gloo (buffers too large for the arena's slots, and every buffer
// under DISTTEST_NO_HOST_ARENA=1), and for an empty buffer against a full one.
TEST_P(VerdictsTest, RanksThatDisagreeAboutACollectiveAllFail) {
  struct Case {
    const char* test;
    int world;
    const char* calls;
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
  for (const char* no_arena : {"0", "1"}) {
    SCOPED_TRACE(std::string("DISTTEST_NO_HOST_ARENA=") + no_arena);
    Verdict v =
        Run("VerdictsMismatch.*", {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 1);
    // At once: not at the collectives' deadline (0.9 x the 60 s timeout).
    EXPECT_LT(v.run.elapsed, std::chrono::seconds(20));
    EXPECT_THAT(v.run.out, Not(HasSubstr("marker-mismatch-passed")));
    EXPECT_THAT(v.run.out, Not(HasSubstr("was killed by disttest")));
    for (const Case& c : cases) {
      std::string tc =
          TestCaseXml(v.xml, fmt::format("{}/{}ranks", c.test, c.world));
      EXPECT_THAT(tc, HasSubstr("<failure")) << c.test;
      // Every rank fails naming every rank's call (ranks whose own call is
      // the same say it once, together).
      std::set<int> all;
      for (int r = 0; r < c.world; ++r) all.insert(r);
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
    for (const char* agree :
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

}  // namespace
}  // namespace disttest::testing
