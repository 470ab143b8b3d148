// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// No false pass off the main road: runs the broken programs of
// no_false_pass_child_.cc in fork, exec and pooled ranks and checks that each
// fails, at the right line, saying why (and that the controls pass).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "child_process.h"
#include "driver.h"

namespace disttest::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct Mode {
  ChildSetup setup;
  bool pooled;
};

void PrintTo(const Mode& mode, std::ostream* os) {
  *os << mode.setup.name << (mode.pooled ? "Pooled" : "");
}

// "no_false_pass_child_.cc:42: Failure\n[rank 1/2] "
std::string At(const std::string& marker, const std::string& label) {
  return "no_false_pass_child_.cc:" +
         std::to_string(LineIn(DISTTEST_NO_FALSE_PASS_CHILD_SOURCE, marker)) +
         ": Failure\n" + label + " ";
}

// "no_false_pass_child_.cc:42"
std::string Line(const std::string& marker) {
  return "no_false_pass_child_.cc:" +
         std::to_string(LineIn(DISTTEST_NO_FALSE_PASS_CHILD_SOURCE, marker));
}

class NoFalsePassTest : public ::testing::TestWithParam<Mode> {
 protected:
  Verdict Run(const std::string& filter,
              std::vector<std::pair<std::string, std::string>> env = {}) {
    if (GetParam().pooled) env.emplace_back("VERDICTS_REUSE", "1");
    return RunVerdicts(GetParam().setup, "NoFalsePass*." + filter,
                       std::move(env));
  }
  // Whether the ranks are threads of one process (LaunchMode::kThreads).
  bool Threads() const {
    return std::string(GetParam().setup.launch) == "threads";
  }
};

// --- Collective assertions: values, compared with ==. ---

TEST_P(NoFalsePassTest, AllEqSeesASumThatDiffersInTheFourthDecimal) {
  Verdict v = Run("SumsThatDifferInTheFourthDecimal/4ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-sum", "[ranks 0-3 of 4]") +
                        "DIST_EXPECT_ALL_EQ(std::accumulate(w.begin(), "
                        "w.end(), 0.0)): the 4 ranks disagree:\n  500: ranks "
                        "0, 1, 3\n  500.0001"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqSeesOneElementPastThePrintedOnes) {
  Verdict v = Run("VectorsThatDifferAtOneElement/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-vector", "[ranks 0-1 of 2]") +
                        "DIST_EXPECT_ALL_EQ(v): the 2 ranks disagree, first "
                        "at index 50:\n"
                        "  { [47] 0, 0, 0, 0, 0, 0, 0, ... } (100 elements): "
                        "rank 0\n"
                        "  { [47] 0, 0, 0, 1, 0, 0, 0, ... } (100 elements): "
                        "rank 1"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqSeesTheLastBitOfAFloat) {
  Verdict v = Run("FloatsThatDifferInTheLastBit/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(x): the 2 ranks "
                                   "disagree:\n  1: rank 0\n  1.0000001: "
                                   "rank 1"))
      << v.run.out;
}

// A long double is shown with all its digits, not as a double's.
TEST_P(NoFalsePassTest, AllEqShowsTheLastBitOfALongDouble) {
  Verdict v = Run("LongDoublesThatDifferInTheLastBit/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(x): the 2 ranks "
                                   "disagree:\n  1: rank 0\n  "
                                   "1.0000000000000000001: rank 1"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqSeesAValueAgainstItsPrintedDigits) {
  Verdict v = Run("TwoThirdsAgainstItsPrintedDigits/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("disagree:\n  0.6666666666666666: rank "
                                   "0\n  0.666667: rank 1"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqShowsAWindowOfALongString) {
  Verdict v = Run("LongStringsThatDifferInOneCharacter/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(text): the 2 ranks "
                                   "disagree, first at index 70000:"));
  EXPECT_THAT(v.run.out, HasSubstr("...\"aaaaaaaaaaaaaaaaaaaaaaaabaaaaaaaaaaa"
                                   "aaaaaaaaaaaa\"... (100000 chars): rank 1"))
      << v.run.out;
  // A window, not the 100 KB value (twice, with the XML's copy).
  EXPECT_LT(v.run.out.size(), 20000u);
}

TEST_P(NoFalsePassTest, FatalAllEqOfDifferentLengthsReturnsOnEveryRank) {
  Verdict v = Run("VectorsOfDifferentLengths/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-lengths", "[ranks 0-1 of 2]") +
                        "DIST_ASSERT_ALL_EQ(v): the 2 ranks disagree, first "
                        "at index 3:\n  { 1.5, 2.5, 3.5 }: rank 0\n"
                        "  { 1.5, 2.5, 3.5, 4.5 }: rank 1"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-after-fatal-all-eq")));
}

TEST_P(NoFalsePassTest, AllEqComparesEveryByteOfACharArray) {
  Verdict v = Run("CharArraysThatDifferAfterANul/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(buf): the 2 ranks "
                                   "disagree, first at index 5:"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqComparesWhatAStringViewShowsNotItsAddress) {
  Verdict v = Run("OptionalStringViewsThatDiffer/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(view): the 2 ranks "
                                   "disagree"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqAtDifferentLinesSaysSoNotCompareBytes) {
  Verdict v = Run("AssertionsAtDifferentLines/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(
      v.run.out,
      HasSubstr("DIST_EXPECT_ALL_EQ(1.0f): rank 1 of the 2 ranks is at "
                "another collective assertion, or compares a value of "
                "another type, than this one at "
                "no_false_pass_child_.cc:" +
                std::to_string(LineIn(DISTTEST_NO_FALSE_PASS_CHILD_SOURCE,
                                      "marker-line-a"))))
      << v.run.out;
}

// Told apart by their text too, not only their file:line; DIST_EXPECT_ALL_TRUE
// by its place, not only its value.
TEST_P(NoFalsePassTest, AssertionsOnOneLineOrAllTrueAtTwoLinesSaySo) {
  Verdict v =
      Run("AssertionsOnOneLine/2ranks:NoFalsePass.AllTrueAtDifferentLines/"
          "2ranks:NoFalsePass.AllTrueAgainstAllEq/2ranks:NoFalsePass."
          "AssertionReachedOnceMore/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  // (A pooled rank that passed leaves its peer waiting: the deadlock look
  // ends that one, naming the same call.)
  if (!GetParam().pooled) {
    EXPECT_THAT(
        v.run.out,
        HasSubstr("DIST_EXPECT_ALL_EQ(i) at " + Line("marker-once-more") +
                  " could not compare across the ranks (each must "
                  "reach the same collective assertions, as many times "
                  "and in the same order): "))
        << v.run.out;
  }
  EXPECT_THAT(v.run.out,
              HasSubstr("DIST_EXPECT_ALL_EQ(weights): rank 1 of the 2 ranks "
                        "is at another collective assertion, or compares a "
                        "value of another type, than this one at " +
                        Line("marker-one-line")))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("DIST_EXPECT_ALL_TRUE(rank() == 0): rank 1 of the 2 "
                        "ranks is at another collective assertion, or "
                        "compares a value of another type, than this one at " +
                        Line("marker-true-a")))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("DIST_EXPECT_ALL_TRUE(true): rank 1 of the 2 ranks is "
                        "at another collective assertion, or compares a value "
                        "of another type, than this one at " +
                        Line("marker-true-against-eq")))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[       OK ]"))) << v.run.out;
}

TEST_P(NoFalsePassTest, NanOnEveryRankIsNotAgreementAsWithExpectEq) {
  Verdict v = Run("NanEverywhereIsNotEqual/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("a value that holds NaN equals nothing"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, NanOnTheOnlyRankIsNotEqual) {
  Verdict v = Run("NanOnTheOnlyRankIsNotEqual/1ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("a value that holds NaN equals nothing"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("at index 1")) << v.run.out;
}

TEST_P(NoFalsePassTest, AllEqOfEqualValuesPasses) {
  Verdict v = Run("ValuesThatAreEqualAgree/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

// As threads, the ranks share a global: that they agree says nothing.
TEST_P(NoFalsePassTest, AllEqOfAGlobalComparesEachRanksOwnOrFails) {
  Verdict v = Run("AResultLeftInAGlobal/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  const std::string failure = At("marker-global", "[ranks 0-1 of 2]");
  if (Threads()) {
    EXPECT_THAT(
        v.run.out,
        HasSubstr(failure + "DIST_EXPECT_ALL_EQ(g_result): every one of the 2 "
                            "ranks passed the same object (at 0x"))
        << v.run.out;
    EXPECT_THAT(v.run.out, ContainsRegex("at 0x[0-9a-f]+, a global, a static "
                                         "or one they share, or a const view "
                                         "of one\\), so this compares nothing"))
        << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("options().process_only); a value every "
                                     "rank shares by design (a table made at "
                                     "run time, what the test's parameter "
                                     "holds) needs no comparing"))
        << v.run.out;
  } else {
    EXPECT_THAT(v.run.out,
                HasSubstr(failure + "DIST_EXPECT_ALL_EQ(g_result): the 2 ranks "
                                    "disagree:\n  42: rank 0\n  0: rank 1"))
        << v.run.out;
  }
}

// DIST_EXPECT_ALL_TRUE of a global flag: as threads, one object that the
// last writer set; as processes, false on rank 0.
TEST_P(NoFalsePassTest, AllTrueOfAGlobalFlagComparesEachRanksOwnOrFails) {
  Verdict v = Run("AFlagLeftInAGlobal/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(
      v.run.out,
      HasSubstr(Threads() ? At("marker-global-flag", "[ranks 0-1 of 2]") +
                                "DIST_EXPECT_ALL_TRUE(g_flag): every one "
                                "of the 2 ranks passed the same object"
                          : At("marker-global-flag", "[ranks 0-1 of 2]") +
                                "DIST_EXPECT_ALL_TRUE(g_flag) is false on "
                                "rank 0 of 2"))
      << v.run.out;
}

// Options a rank changes have no effect: the test fails saying so, and
// where to set them.
TEST_P(NoFalsePassTest, OptionsChangedInARankFailTheTest) {
  Verdict v = Run("SkipsOnOneRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("options().skip_policy changed in a rank (in "
                        "SetUpRank(), the body or TearDownRank()), where it "
                        "has no effect: disttest reads options() where it "
                        "sets the test up, before any rank starts; set it in "
                        "the fixture's constructor"))
      << v.run.out;
  v = Run("SetsATimeoutInItsBody/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-late-body", "[ranks 0-1 of 2]") +
                        "options().timeout, options().compare_calls changed "
                        "in a rank"))
      << v.run.out;
}

// The same through a const view of the global (std::as_const, a const
// reference): as threads, one writable object all the same.
TEST_P(NoFalsePassTest, AllEqOfAConstViewOfAGlobalFailsToo) {
  Verdict v = Run("AResultLeftInAGlobalViewedAsConst/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  for (const auto& [marker, expression] :
       {std::pair<std::string, std::string>{"marker-global-as-const",
                                            "std::as_const(g_result)"},
        {"marker-global-const-ref", "result"},
        {"marker-global-member", "totals.value"},
        {"marker-global-const-member", "g_held->value"}}) {
    const std::string failure = At(marker, "[ranks 0-1 of 2]") +
                                "DIST_EXPECT_ALL_EQ(" + expression + "): ";
    EXPECT_THAT(v.run.out,
                HasSubstr(failure + (Threads() ? "every one of the 2 ranks "
                                                 "passed the same object"
                                               : "the 2 ranks disagree:\n"
                                                 "  42: rank 0\n  0: rank 1")))
        << v.run.out;
  }
}

// --- Requests. ---

TEST_P(NoFalsePassTest, RequestDroppedWithoutWaitFailsAtItsLine) {
  Verdict v = Run("RequestDroppedWithoutWait/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-dropped", "[rank 0/2]") +
                        "the Request of isend(1 x int32 to rank 1, tag 7) on "))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("was destroyed without wait(), and its "
                                   "operation failed: "));
}

// At the default timeout (54 s): fails at once (the arena: its peer's body
// returned; Gloo: its connection), or, pooled, within a second (its peer
// finished its test: nothing can receive it).
TEST_P(NoFalsePassTest, RequestDroppedWithoutWaitEndsLongBeforeTheTimeout) {
  Verdict v = Run("RequestDroppedWithoutWaitAtTheDefaultTimeout/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("timed out"))) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(GetParam().pooled
                            ? "rank 0 waits for rank 1, which has finished "
                              "its test, and cannot go on (a deadlock): rank "
                              "0 waits in isend(1 x int32 to rank 1, tag 7) "
                              "at " +
                                  Line("marker-dropped-long")
                            : At("marker-dropped-long", "[rank 0/2]") +
                                  "the Request of isend(1 x int32 to rank 1, "
                                  "tag 7) on world made here was destroyed "
                                  "without wait()"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, RequestThatOutlivesItsCommunicatorFailsAtItsLine) {
  Verdict v = Run("RequestOutlivesItsCommunicator/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-outlives", "[rank 0/2]") +
                        "the Request of isend(1 x int32 to rank 1, tag 8) "
                        "made here was destroyed without wait(), and its "
                        "operation failed: its communicator was destroyed "
                        "first (wait for a Request before its communicator "
                        "goes)"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, IsendLeftInFlightFailsAndItsMessageReachesNoLaterTest) {
  Verdict v = Run("IsendLeftInFlight/2ranks:NoFalsePass.ReceivesOnlyWhat*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(At("marker-left-in-flight", "[rank 0/2]") +
                                   "isend(1 x int32 to rank 1, tag 5) on "))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("was never waited for: the test ended with "
                                   "its Request pending"));
  // The next test's receive of that tag gets nothing (pooled ranks too).
  EXPECT_THAT(v.run.out, HasSubstr("[       OK ] NoFalsePass."
                                   "ReceivesOnlyWhatItsOwnTestSent/2ranks"))
      << v.run.out;
}

// A thread a test started and left running ends with its rank's process,
// as at the end of a forked rank: a pooled rank does not run the next test
// beside it (it says so, and that test starts on new ranks), so what the
// thread sends later reaches no later test's receive. Whether the body
// started it or the test object's constructor did, in the rank, before
// disttest's program ran (then every rank starts one).
TEST_P(NoFalsePassTest, AThreadATestLeftRunningReachesNoLaterTest) {
  for (const char* first :
       {"ThreadLeftRunningSendsLater/2ranks", "SendsLater/2ranks"}) {
    SCOPED_TRACE(first);
    Verdict v =
        Run(std::string(first) +
            ":NoFalsePass.ReceivesNothingFromAnEarlierTestsThread/2ranks");
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("[       OK ] NoFalsePass."
                                     "ReceivesNothingFromAnEarlierTestsThread/"
                                     "2ranks"))
        << v.run.out;
    if (GetParam().pooled) {
      EXPECT_THAT(v.run.err,
                  HasSubstr("[rank 0] disttest: note: the test left 1 thread "
                            "running ("))
          << v.run.err;
      EXPECT_THAT(v.run.err,
                  HasSubstr("), which could still use the communicator: the "
                            "next test starts on new ranks"));
    }
  }
}

// What a thread the test left running reports after its rank's test ended,
// while the parent still waits for the others, is that rank's failure (it
// was printed and dropped).
TEST_P(NoFalsePassTest, AThreadATestLeftRunningFailsItAfterItsEnd) {
  Verdict v = Run("ThreadLeftRunningFailsAfterTheTest/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] NoFalsePass."
                                   "ThreadLeftRunningFailsAfterTheTest/2ranks"))
      << v.run.out;
  // Where the ranks are threads, the thread is no rank's (told to rank 0),
  // and fails at once.
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-late-failure", "[rank 0/2]") +
                        (Threads() ? "in a thread that no rank runs"
                                   : "after this rank's test had ended, from "
                                     "a thread the test left running: ")))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-late-failure\n")) << v.run.out;
}

// A send's buffer must stay unchanged until its wait() returns; a change
// fails the wait, naming the isend's line, with the arena (which copies it
// at once) or without.
TEST_P(NoFalsePassTest, SendBufferChangedBeforeItsWaitFails) {
  for (const char* no_arena : {"0", "1"}) {
    Verdict v = Run("SendBufferChangedBeforeItsWait/2ranks",
                    {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(
        v.run.out,
        HasSubstr("isend(4 x int32 to rank 1, tag 4) on world made at " +
                  Line("marker-changed-send") +
                  ": its buffer changed before its wait() returned"))
        << v.run.out;
  }
}

// Bugs of the program that the test catches fail it all the same, as a
// mismatch of calls does (trial 12: a retry around wait() passed).
TEST_P(NoFalsePassTest, SendBufferChangedFailsWhereTheTestCatchesIt) {
  for (const char* no_arena : {"0", "1"}) {
    Verdict v = Run("SendBufferChangedAndTheErrorCaught/2ranks",
                    {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(v.run.out,
                HasSubstr(At("marker-changed-caught", "[rank 0/2]") +
                          "the test caught disttest::CommError: isend(4 x "
                          "int32 to rank 1, tag 4) on world made at " +
                          Line("marker-changed-caught") +
                          ": its buffer changed before its wait() returned"))
        << v.run.out;
    EXPECT_THAT(v.run.out,
                HasSubstr("A send buffer changed before its wait() returned "
                          "is a bug of the program, not of its environment: "
                          "the test fails even though it caught the error"))
        << v.run.out;
  }
}

TEST_P(NoFalsePassTest, TwoThreadsInCollectivesFailWhereTheTestCatchesIt) {
  Verdict v = Run("TwoThreadsInCollectivesAndTheErrorCaught/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-two-threads", "[rank 0/2]") +
                        "the test caught disttest::CommError: [rank 0/2] "
                        "allreduce(1 x int32, sum) on world: another thread "
                        "of this rank is in a collective of this "
                        "communicator"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("Collectives of one communicator from two threads at "
                        "once are a bug of the program, not of its "
                        "environment"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 1/2]"))) << v.run.out;
}

TEST_P(NoFalsePassTest, TwoThreadsOnASplitFailTheRankWhoseThreadsTheyAre) {
  Verdict v = Run("TwoThreadsInCollectivesOfASplitAndTheErrorCaught/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-two-threads", "[rank 0/2]") +
                        "the test caught disttest::CommError: [rank 1/2] "
                        "allreduce(1 x int32, sum) on world split 0 (color "
                        "0): another thread of this rank is in a collective"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 1/2] the test caught")))
      << v.run.out;
}

// Isends kept in flight past what a CPU backend holds at once, received in
// reverse: 200 pass on every transport; past the host arena's mailbox (256
// pieces) the receive that waits for one behind them says so, not that its
// sender never sent it.
TEST_P(NoFalsePassTest, ManyIsendsReceivedInReversePass) {
  for (const char* no_arena : {"0", "1"}) {
    Verdict v =
        Run("IsendsReceivedInReverse/2ranks",
            {{"NFP_ISENDS", "200"}, {"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  }
  Verdict full = Run("IsendsReceivedInReverse/2ranks",
                     {{"NFP_ISENDS", "300"}, {"NFP_SHORT", "1"}});
  EXPECT_EQ(full.run.exit_code, 1) << full.run.out;
  EXPECT_THAT(full.run.out,
              HasSubstr("they fill its host-arena mailbox (256 pieces or 1024 "
                        "KiB at once, for all its receivers), so a message it "
                        "sent after them may wait for room there while this "
                        "receive waits for it"))
      << full.run.out;
}

// A request a rank's helper thread left in flight is that rank's: its
// failure, at its line (where ranks are threads too: charged to the rank
// of its communicator, not to whichever rank looks first).
TEST_P(NoFalsePassTest, IsendAHelperThreadLeftInFlightIsItsRanksFailure) {
  Verdict v = Run("IsendLeftInFlightByAHelperThread/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-helper-left-in-flight", "[rank 1/2]") +
                        "isend(1 x int32 to rank 0, tag 6) on "))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]"))) << v.run.out;
}

// Where the ranks are threads, a communicator made in a thread no rank runs
// is refused (whose calls they are would be unknown); elsewhere it works.
TEST_P(NoFalsePassTest, CommunicatorMadeInAHelperThread) {
  Verdict v = Run("SplitInAHelperThread/2ranks");
  if (!Threads()) {
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("marker-helper-split 1: no error"));
    return;
  }
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(
      v.run.out,
      HasSubstr("marker-helper-split 1: [rank 1/2] split of world: made "
                "in a thread that no rank runs"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, IrecvNobodySendsToFailsAtItsLine) {
  Verdict v = Run("IrecvNobodySendsTo/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(At("marker-irecv-in-flight", "[rank 1/2]") +
                                   "irecv(1 x int32 from rank 0, tag 3) on "))
      << v.run.out;
}

TEST_P(NoFalsePassTest, RequestsThatCompletePass) {
  Verdict v = Run("RequestsThatCompletePass/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

// --- Point-to-point mismatches on every communicator. ---

TEST_P(NoFalsePassTest, PointToPointMismatchesFailOnEveryCommunicator) {
  for (const char* what : {"count", "type", "bytes"}) {
    for (const char* comm :
         {"ASplitCommunicator", "ItsOwnCommunicator", "TheWorld"}) {
      for (const char* arena : {"0", "1"}) {
        if (std::string(arena) == "0" && std::string(comm) != "TheWorld") {
          continue;  // Only the world has a host arena to turn off.
        }
        Verdict v = Run(
            std::string("PointToPointMismatchOn") + comm + "/2ranks",
            {{"VERDICTS_MISMATCH", what}, {"DISTTEST_NO_HOST_ARENA", arena}});
        EXPECT_EQ(v.run.exit_code, 1)
            << what << " on " << comm << " (no arena: " << arena << ")\n"
            << v.run.out;
        // The test fails, and a rank says why: the arena compares the calls;
        // Gloo never pairs them, and the timeout of the rank that gives up
        // first says what would (its peer may then see the connection close,
        // or be ended after the grace, instead).
        const bool arena_on =
            std::string(comm) == "TheWorld" && std::string(arena) == "0";
        EXPECT_GE(Occurrences(v.run.out,
                              arena_on ? "with tag 1; rank 1 expected "
                                       : "(a message pairs only with a "
                                         "receive of the same tag, element "
                                         "type and count: did rank "),
                  1u)
            << what << " on " << comm << " (no arena: " << arena << ")\n"
            << v.run.out;
      }
    }
  }
}

// gtest's *_ON_ALL_THREADS where the ranks are threads would take one
// rank's failure as another's: refused there, saying why, at the line.
// In a process of its own a rank has them as gtest does.
TEST_P(NoFalsePassTest, ExpectationsOnAllThreadsAreEachRanksOwn) {
  const std::string refused =
      "_FAILURE_ON_ALL_THREADS takes the failures of every thread of the "
      "process, and here the ranks are threads of one process "
      "(LaunchMode::kThreads): it would take another rank's failure as this "
      "rank's, and miss this rank's own. Run the test as processes "
      "(options().process_only = true)";
  Verdict cross = Run("ExpectsAFailureOnAllThreads/2ranks");
  EXPECT_EQ(cross.run.exit_code, 1) << cross.run.out;
  EXPECT_THAT(cross.run.out, HasSubstr("marker-worker-of-rank-1"))
      << cross.run.out;
  if (Threads()) {
    EXPECT_THAT(cross.run.out,
                HasSubstr(At("marker-on-all-threads", "[rank 0/2]") +
                          "EXPECT_NONFATAL" + refused))
        << cross.run.out;
  } else {
    EXPECT_THAT(cross.run.out, HasSubstr("Expected: 1 non-fatal failure"))
        << cross.run.out;
  }
  Verdict own = Run("ExpectsItsOwnFailureOnAllThreads/2ranks");
  EXPECT_EQ(own.run.exit_code, Threads() ? 1 : 0) << own.run.out;
  if (Threads()) {
    EXPECT_THAT(own.run.out,
                HasSubstr("[ranks 0-1 of 2] EXPECT_NONFATAL" + refused))
        << own.run.out;
    EXPECT_THAT(own.run.out,
                HasSubstr("[ranks 0-1 of 2] EXPECT_FATAL" + refused))
        << own.run.out;
  }
}

// A rank's isend and irecv to itself pair (ring code at world size 1), with
// the host arena and without; what does not pair fails saying so.
TEST_P(NoFalsePassTest, MessagesToItselfPairAsInMpi) {
  for (const char* no_arena : {"0", "1"}) {
    Verdict v =
        Run("RingAtEveryWorldSize/*", {{"DISTTEST_NO_HOST_ARENA", no_arena}});
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 3 tests")) << v.run.out;
  }
  Verdict mismatch = Run("MessagesToItself/1ranks", {{"NFP_SELF", "mismatch"}});
  EXPECT_EQ(mismatch.run.exit_code, 1) << mismatch.run.out;
  EXPECT_THAT(mismatch.run.out,
              HasSubstr("Failure\n[rank 0/1] the test body threw "
                        "disttest::CommError: [rank 0/1] this rank sent itself "
                        "8 x float32 with tag 5; it expected 16 x float32 with "
                        "tag 5"))
      << mismatch.run.out;
  // Once: not again for the send of the pair, dropped on the way out.
  EXPECT_EQ(Occurrences(mismatch.run.out, ": Failure\n"), 1u)
      << mismatch.run.out;
  Verdict order = Run("MessagesToItself/1ranks", {{"NFP_SELF", "order"}});
  EXPECT_EQ(order.run.exit_code, 0) << order.run.out;
  Verdict caught = Run("MessagesToItself/1ranks", {{"NFP_SELF", "caught"}});
  EXPECT_EQ(caught.run.exit_code, 1) << caught.run.out;
  EXPECT_THAT(caught.run.out,
              HasSubstr("the test caught disttest::CommError: [rank 0/1] this "
                        "rank sent itself 8 x float32 with tag 5"))
      << caught.run.out;
  Verdict unpaired = Run("MessagesToItself/1ranks", {{"NFP_SELF", "unpaired"}});
  EXPECT_EQ(unpaired.run.exit_code, 0) << unpaired.run.out;
  EXPECT_THAT(unpaired.run.out,
              HasSubstr("marker-self-unpaired: [rank 0/1] isend to this rank "
                        "itself (1 x float32 with tag 6) timed out after 300 "
                        "ms: no irecv of this rank took it"))
      << unpaired.run.out;
  Verdict blocking = Run("MessagesToItself/1ranks", {{"NFP_SELF", "blocking"}});
  EXPECT_EQ(blocking.run.exit_code, 0) << blocking.run.out;
  EXPECT_THAT(blocking.run.out,
              HasSubstr("the peer is this rank itself; a blocking send "
                        "completes only when its receive has taken the "
                        "message"))
      << blocking.run.out;
}

// TearDown() runs on each rank's object after its body, as SetUp() runs
// before it: a check there of what the rank did fails the rank, in every
// mode (it ran in the parent only, where it passed, in fresh forked and
// re-executed ranks).
TEST_P(NoFalsePassTest, TearDownRunsInEveryRank) {
  Verdict v = Run("ChecksWhatTheRankLeft/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-teardown-check on rank 1"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-teardown-check on rank 0")))
      << v.run.out;
}

// A child of fork() that returns from the body would go on as the rank and
// report for it: a pass, while the rank's own process exited mid-body.
// It fails the rank where it returns, and ends there.
TEST_P(NoFalsePassTest, AForkedChildThatReturnsFromTheBodyFailsIt) {
  for (const char* how : {"exit0", "waits"}) {
    SCOPED_TRACE(how);
    Verdict v =
        Run("ForkedChildReturnsFromTheBody/2ranks", {{"NFP_FORK", how}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(v.run.out,
                ContainsRegex("\\[rank 1/2\\] a process forked in the test "
                              "body \\(pid [0-9]+; the rank's is [0-9]+\\) "
                              "returned from it instead of ending: a child "
                              "of fork\\(\\) must end with _exit\\(\\) or "
                              "exec"))
        << v.run.out;
    EXPECT_THAT(v.run.out, Not(HasSubstr("after reporting that it passed")))
        << v.run.out;
  }
}

// A mismatch is a bug of the program: caught by the test, it fails all the
// same, where the call was made, once on each rank (not again where the
// test or a request's destructor reported it).
TEST_P(NoFalsePassTest, MismatchesTheTestCatchesFailIt) {
  const std::string bug =
      "\nCalls that do not match across the ranks are a bug of the program, "
      "not of its environment: the test fails even though it caught the "
      "error";
  Verdict p2p = Run("MismatchTheTestCatches/2ranks", {{"NFP_CAUGHT", "p2p"}});
  EXPECT_EQ(p2p.run.exit_code, 1) << p2p.run.out;
  EXPECT_THAT(p2p.run.out,
              HasSubstr(At("marker-caught-send", "[rank 0/2]") +
                        "the test caught disttest::CommError: [rank 0/2] send "
                        "of 8 float32 to rank 1 (tag 3) failed: rank 0 sent 8 "
                        "x float32 with tag 3; rank 1 expected 16 x float32 "
                        "with tag 3" +
                        bug))
      << p2p.run.out;
  EXPECT_THAT(p2p.run.out,
              HasSubstr(At("marker-caught-recv", "[rank 1/2]") +
                        "the test caught disttest::CommError: [rank 1/2] recv "
                        "of 16 float32 from rank 0 (tag 3) failed: "))
      << p2p.run.out;
  for (const char* how : {"collective", "skip"}) {
    Verdict v = Run("MismatchTheTestCatches/2ranks", {{"NFP_CAUGHT", how}});
    EXPECT_EQ(v.run.exit_code, 1) << how << "\n" << v.run.out;
    for (const char* label : {"[rank 0/2]", "[rank 1/2]"}) {
      EXPECT_EQ(
          Occurrences(v.run.out, At("marker-caught-allreduce", label) +
                                     "the test caught disttest::CommError: " +
                                     label + " allreduce of "),
          1u)
          << how << "\n"
          << v.run.out;
    }
    EXPECT_THAT(v.run.out, HasSubstr("does not match across the 2 ranks: "
                                     "rank 0: allreduce(8 x float32, sum); "
                                     "rank 1: allreduce(16 x float32, sum)" +
                                     bug))
        << how << "\n"
        << v.run.out;
  }
  // Caught in a thread the rank started: that rank's failure.
  Verdict thread =
      Run("MismatchTheTestCatches/2ranks", {{"NFP_CAUGHT", "thread"}});
  EXPECT_EQ(thread.run.exit_code, 1) << thread.run.out;
  EXPECT_EQ(
      Occurrences(thread.run.out, "/2] the test caught disttest::CommError: "),
      2u)
      << thread.run.out;
  // Reported already: by the test, or by a Request's destructor.
  for (const char* how : {"said", "request"}) {
    Verdict v = Run("MismatchTheTestCatches/2ranks", {{"NFP_CAUGHT", how}});
    EXPECT_EQ(v.run.exit_code, 1) << how << "\n" << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr(std::string(how) == "said"
                                         ? "said: [rank 1/2] "
                                         : "was destroyed without wait(), and "
                                           "its operation failed: "))
        << how << "\n"
        << v.run.out;
    EXPECT_THAT(v.run.out, Not(HasSubstr("the test caught"))) << how << "\n"
                                                              << v.run.out;
  }
}

// --- Deadlocks: named within about a second, on every communicator. ---

// The cycle's message, from the parent's look at the ledgers (not the
// 60 s timeout, nor a communicator's 54 s one).
void ExpectDeadlock(const Verdict& v, const std::string& cycle) {
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(cycle)) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("timed out"))) << v.run.out;
}

TEST_P(NoFalsePassTest, DeadlockOfTwoTagsEndsNamingBothCalls) {
  for (const char* arena : {"0", "1"}) {
    ExpectDeadlock(
        Run("DeadlockOfTwoTags/2ranks", {{"DISTTEST_NO_HOST_ARENA", arena}}),
        "ranks 0-1 wait for each other and none can go on (a deadlock): rank "
        "0 waits in send(1 x int32 to rank 1, tag 1) at " +
            Line("marker-deadlock-send") +
            ", which rank 1 has posted no receive for; rank 1 waits in recv(1 "
            "x int32 from rank 0, tag 2) at " +
            Line("marker-deadlock-recv") + ", which rank 0 has not sent");
  }
}

TEST_P(NoFalsePassTest, DeadlockInARingEndsNamingTheCycle) {
  ExpectDeadlock(Run("DeadlockInARing/4ranks"),
                 "ranks 0-3 wait for each other and none can go on (a "
                 "deadlock): rank 0 waits in recv(1 x int32 from rank 3, tag "
                 "0) at " +
                     Line("marker-ring-recv") +
                     ", which rank 3 has not sent; rank 3 waits in recv(1 x "
                     "int32 from rank 2, tag 0)");
}

TEST_P(NoFalsePassTest, DeadlockOnASplitCommunicatorNamesItsRanks) {
  ExpectDeadlock(Run("DeadlockOnASplitCommunicator/4ranks"),
                 "ranks 0, 2 wait for each other and none can go on (a "
                 "deadlock): rank 0 waits in recv(1 x int32 from rank 1, tag "
                 "4) on world split 0 (color 0) at " +
                     Line("marker-split-recv") +
                     ", which rank 2 (rank 1 there) has not sent; rank 2 "
                     "waits in recv(1 x int32 from rank 0, tag 4) on world "
                     "split 0 (color 0)");
}

// CreateCommunicator waits for every rank of the new communicator; one
// that has finished its test never comes. Before, the ranks waited out the
// test's timeout.
TEST_P(NoFalsePassTest, MakingACommunicatorThatARankNeverMakesEnds) {
  ExpectDeadlock(Run("MakeACommunicatorThatARankNeverMakes/3ranks"),
                 "ranks 0-1 wait to make communicator \"mine\" of 3 ranks at " +
                     Line("marker-make-never") +
                     ", and 1 of its ranks has not come; no other rank can "
                     "come (a deadlock): rank 2 has finished its test");
}

// One member past the collective (a broadcast's non-root has its data) is
// no reason to stop looking: the root still waits for rank 2, which waits
// in the world's barrier for the root (trial 12: 90% of the timeout).
TEST_P(NoFalsePassTest, DeadlockWhileAnotherRankIsPastTheCollectiveEnds) {
  const Verdict v = Run("BroadcastThatOneRankSkipsWhileAnotherIsDone/3ranks");
  ExpectDeadlock(v,
                 "ranks 0, 2 wait for each other and none can go on (a "
                 "deadlock): rank 0 waits in broadcast(1 x int32, root 0) on "
                 "world split 0 (color 0) at " +
                     Line("marker-broadcast-skipped") +
                     ", which rank 2 has not entered; rank 2 waits in "
                     "barrier() at " +
                     Line("marker-barrier-after") +
                     ", which rank 0 has not entered");
  // The rank that never came is in the split's paragraph, saying where.
  EXPECT_THAT(v.run.out,
              HasSubstr("rank 2 is not in it: it has entered no collective on "
                        "world split 0 (color 0) in this test; it is in #2 "
                        "barrier() on the world communicator at " +
                        Line("marker-barrier-after")))
      << v.run.out;
}

// Inputs that overlap their outputs give every rank the input as it was at
// the call, on every communicator (the front copies such an input for the
// CPU backends: Gloo's allgather copies it into the output with memcpy,
// which an overlap makes undefined; ASan calls it memcpy-param-overlap).
TEST_P(NoFalsePassTest, OverlappingBuffersReadTheInputAsItWas) {
  for (const char* arena : {"0", "1"}) {
    Verdict v = Run("OverlappingBuffersOnEveryCommunicator/3ranks",
                    {{"DISTTEST_NO_HOST_ARENA", arena}});
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    for (const char* comm : {"world", "split", "mine"}) {
      for (int r = 0; r < 3; ++r) {
        EXPECT_THAT(v.run.out,
                    HasSubstr(fmt::format("marker-overlap {} rank {} wrong 0",
                                          comm, r)))
            << v.run.out;
      }
    }
  }
}

TEST_P(NoFalsePassTest, DeadlockOfASendAndACollectiveEnds) {
  ExpectDeadlock(Run("DeadlockOfASendAndACollective/2ranks"),
                 "rank 1 waits in allreduce(1 x int32, sum) at " +
                     Line("marker-collective") +
                     ", which rank 0 has not entered");
}

TEST_P(NoFalsePassTest, ReceiveFromARankThatFinishedEnds) {
  Verdict v = Run("ReceiveFromARankThatFinished/2ranks");
  ExpectDeadlock(v,
                 "rank 1 waits for rank 0, which has finished its test, and "
                 "cannot go on (a deadlock): rank 1 waits in recv(1 x int32 "
                 "from rank 0, tag 9) on world split 0 (color 0) at " +
                     Line("marker-recv-from-finished"));
  // Rank 0 had passed: ending it is no failure of its own.
  EXPECT_THAT(v.run.out, Not(HasSubstr("first failure, rank 0"))) << v.run.out;
}

// A receive whose peer closed its end of the connection says where the
// peer is, by the ranks' ledgers, after Gloo's words for the socket.
TEST_P(NoFalsePassTest, ReceiveFromARankThatClosedItsEndSaysWhereItIs) {
  Verdict v = Run("ReceiveFromARankThatClosedItsEnd/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // Rank 0 is on its way to the barrier (before or after its ledger has it),
  // or in it.
  EXPECT_THAT(v.run.out,
              ContainsRegex(
                  "marker-closed-end \\[rank 1/2\\] recv of 1 int32 from rank "
                  "0 \\(tag 9\\) failed: .*Connection (reset|closed) by "
                  "peer.*; by the ranks' ledgers rank 0 is in (barrier\\(\\) "
                  "at " +
                  Line("marker-barrier-after-close") +
                  "|no call of a communicator; its last was (split\\(color "
                  "0, key 0\\)|barrier\\(\\)) at)"))
      << v.run.out;
}

// A slow sender, a receive that gives up soon by itself, and a thread that
// computes before it sends: no deadlock is declared for any.
TEST_P(NoFalsePassTest, NoDeadlockWhereARankCanStillGoOn) {
  Verdict v =
      Run("SlowSenderIsNoDeadlock/2ranks:NoFalsePass."
          "ReceiveThatTimesOutOnPurpose/2ranks:NoFalsePass."
          "ThreadThatComputesThenSendsIsNoDeadlock/2ranks:NoFalsePass."
          "SlowMakerIsNoDeadlock/3ranks:NoFalsePass."
          "MakingThatTimesOutOnPurpose/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("deadlock")));
}

// --- Names. ---

TEST_P(NoFalsePassTest, CommunicatorNamedDifferentlyOnEachRankIsCompared) {
  Verdict v = Run("CommunicatorNamedDifferentlyOnEachRank/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("allreduce(1 x int32, sum)")) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("allreduce(1 x int32, max)")) << v.run.out;
}

// --- The 65th communicator and later. ---

TEST_P(NoFalsePassTest, EveryOneOfAHundredCommunicatorsIsCompared) {
  for (const char* odd : {"0", "62", "63", "64", "99"}) {
    Verdict v = Run("HundredCommunicatorsEachCompared/2ranks",
                    {{"VERDICTS_ODD_COMM", odd}});
    EXPECT_EQ(v.run.exit_code, 1) << "odd one out: " << odd << "\n"
                                  << v.run.out;
    // Named by the communicator; its calls when the ledgers still hold
    // them (the last 64 operations of each rank), else their digests.
    EXPECT_THAT(v.run.out, HasSubstr("world split " + std::string(odd) +
                                     " (color 0) did not match across the "
                                     "ranks, though every call returned"))
        << "odd one out: " << odd;
  }
  Verdict v = Run("HundredCommunicatorsEachCompared/2ranks",
                  {{"VERDICTS_ODD_COMM", "-1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

// A rank's private group, on a store of its own with the world group's
// keys, is not taken for the world group its peers made.
TEST_P(NoFalsePassTest, CallsThatDifferAfterAPrivateGroupMadeAlikeFail) {
  Verdict v = Run("OpsDifferAfterAPrivateGroupMadeAlike/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("collective #0 on communicator \"gloo\" "
                                   "did not match across the ranks"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("called allreduce(1 x float32, sum) at " +
                                   Line("marker-private-group")))
      << v.run.out;
}

// A valid program: a receive posted before a barrier takes the message its
// peer sends before the barrier (not a deadlock, on every transport).
TEST_P(NoFalsePassTest, ReceivesPostedBeforeACollectiveTakeTheirMessages) {
  for (const char* arena : {"0", "1"}) {
    std::vector<std::pair<std::string, std::string>> env;
    if (std::string(arena) == "1")
      env.emplace_back("DISTTEST_NO_HOST_ARENA", "1");
    Verdict v = Run("ReceivesPostedBeforeABarrierComplete/2ranks", env);
    EXPECT_EQ(v.run.exit_code, 0) << "DISTTEST_NO_HOST_ARENA=" << arena << "\n"
                                  << v.run.out;
  }
}

// Two groups made alike on two stores of one scope are said to be so, not
// compared as one.
TEST_P(NoFalsePassTest, GroupsMadeAlikeOnTwoStoresOfOneScopeAreSaid) {
  Verdict v = Run("PairsOnTwoStoresOfOneScope/4ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("communicator \"gloo\" is rank 0 of ranks 0 and 2 at "
                        "once: two communicators made alike (the same "
                        "Store::scope(), prefix and size, on different "
                        "stores) cannot be told apart"))
      << v.run.out;
}

// Groups made in an earlier test, by some of the ranks, do not change how
// the next test's groups are told apart: a pooled process and the one
// process of threads-mode ranks count those it made in each test anew.
TEST_P(NoFalsePassTest, GroupsOfAnEarlierTestLeaveTheNextComparable) {
  Verdict v = Run("PairOfRanks*OnAStoreOfOneScope*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[       OK ] NoFalsePass.PairOfRanks0And1OnAStoreOf"
                        "OneScope/3ranks"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("called allreduce(1 x float32, sum) at " +
                                   Line("marker-pair-of-a-later-test")))
      << v.run.out;
}

// --- Fixture destructors. ---

// The constructor runs in the parent and again in every rank (its own
// object; a re-executed rank's gtest makes it): a failure there is the
// rank's, in every mode, for a pooled rank's next test too.
TEST_P(NoFalsePassTest, FailureInAFixtureConstructorFailsTheTestInEveryMode) {
  Verdict v =
      Run("PassesBeforeAConstructorFails/2ranks:NoFalsePassConstructor."
          "FailsInItsConstructor*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(
      v.run.out,
      HasSubstr("[       OK ] NoFalsePass.PassesBeforeAConstructorFails/"
                "2ranks"));
  for (const char* test :
       {"FailsInItsConstructor/2ranks", "FailsInItsConstructorAgain/2ranks"}) {
    EXPECT_THAT(v.run.out, HasSubstr(std::string("[  FAILED  ] "
                                                 "NoFalsePassConstructor.") +
                                     test))
        << v.run.out;
  }
  EXPECT_EQ(Occurrences(v.run.out,
                        At("marker-constructor-failure", "[ranks 0-1 of 2]") +
                            "Failed\nmarker-constructor-failure"),
            2)
      << v.run.out;
}

// rank() answers in a rank's constructor, SetUp() (gtest's own in a
// re-executed rank) and destructor as in its body: a check there keyed on
// one rank runs on that rank (it was -1 there, and such checks passed).
TEST_P(NoFalsePassTest, RankIsKnownBeforeAndAfterTheBody) {
  Verdict v = Run("ChecksRank1/2ranks:NoFalsePassRankKnown*.AsInTheBody*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[  FAILED  ] NoFalsePassRankKnownInSetUp.ChecksRank1"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(At("marker-set-up-rank-1", "[rank 1/2]") +
                                   "Failed\nmarker-set-up-rank-1"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-destructor-rank-1", "[rank 1/2]") +
                        "Failed\nmarker-destructor-rank-1 2"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[       OK ] NoFalsePassRankKnownInTheConstructor."
                        "AsInTheBody/2ranks"))
      << v.run.out;
}

// A re-executed rank whose gtest made another parameter than the test
// process's runs none of the test (each rank ran a value of its own, and
// the test passed), and says why.
TEST_P(NoFalsePassTest, ParameterMadeAgainInARankMustBeTheTests) {
  Verdict v = Run("RunsTheTestsValue/2ranks/*");
  if (std::string(GetParam().setup.launch) != "exec") {
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    EXPECT_EQ(Occurrences(v.run.out, "marker-param "), 2) << v.run.out;
    return;
  }
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("this re-executed rank's test parameter is "))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("the generator gave other values (std::random_device, "
                        "the time, a file that changed)"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-param"))) << v.run.out;
}

// ... but a parameter that prints otherwise in each process for one value
// (an address; an object printed as its bytes) is not taken for another.
TEST_P(NoFalsePassTest, ParametersThatPrintAnAddressRunInARank) {
  Verdict v = Run("RunsItsPointersValue/2ranks/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_EQ(Occurrences(v.run.out, "marker-pointer-param 1"), 4) << v.run.out;
}

// A parameter printed as its bytes, padding among them (which differ
// between copies of one value): a pooled rank, which finds its test by the
// printed parameter, would not find it; such a test runs on fresh ranks.
TEST_P(NoFalsePassTest, ParameterPrintedWithItsPaddingRuns) {
  // After another test, so that a pooled rank would make its object by name.
  Verdict v = Run("RunsIts*Value/2ranks/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_EQ(Occurrences(v.run.out, "marker-padded-param 1"), 2) << v.run.out;
}

// In a re-executed rank gtest runs no body after these: the rank still
// reports them, and its peers are not left waiting.
TEST_P(NoFalsePassTest, FatalFailureOrSkipBeforeTheBodyInTheRanksIsReported) {
  Verdict v = Run("StopsBeforeTheBody*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-body-ran"))) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("before the test body finished")))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-constructor-fatal", "[ranks 0-1 of 2]") +
                        "Failed\nmarker-constructor-fatal"))
      << v.run.out;
  // Once: what a re-executed rank's stand-in constructor reports again is
  // dropped.
  EXPECT_EQ(Occurrences(v.run.out, "Failed\nmarker-constructor-fatal"), 1)
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-set-up-fatal", "[ranks 0-1 of 2]") +
                        "Failed\nmarker-set-up-fatal"))
      << v.run.out;
  for (const char* test :
       {"NoFalsePassConstructorFailsFatally", "NoFalsePassSetUpFailsFatally"}) {
    EXPECT_THAT(v.run.out, HasSubstr(std::string("[  FAILED  ] ") + test +
                                     ".StopsBeforeTheBody/2ranks ("))
        << v.run.out;
  }
  for (const char* test : {"NoFalsePassConstructorSkips.StopsBeforeTheBody",
                           "NoFalsePassSetUpSkips.StopsBeforeTheBody"}) {
    EXPECT_THAT(v.run.out,
                HasSubstr(std::string("[  SKIPPED ] ") + test + "/2ranks ("))
        << v.run.out;
  }
  EXPECT_THAT(v.run.out,
              HasSubstr("all 2 ranks skipped: marker-constructor-skip"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("all 2 ranks skipped: marker-set-up-skip"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, FailureInAFixtureDestructorFailsTheTestInEveryMode) {
  Verdict v = Run("FailsInItsDestructor*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  for (const char* test :
       {"FailsInItsDestructor/2ranks", "FailsInItsDestructorAgain/2ranks"}) {
    EXPECT_THAT(v.run.out, HasSubstr(std::string("[  FAILED  ] "
                                                 "NoFalsePassDestructor.") +
                                     test))
        << v.run.out;
  }
  // Rank 1's, at the destructor's line, once per test; rank 0's destructor
  // ran too and passed.
  EXPECT_EQ(
      Occurrences(v.run.out, "[rank 1/2] Failed\nmarker-destructor-failure"), 2)
      << v.run.out;
  EXPECT_EQ(Occurrences(v.run.out, "marker-destructor of rank 0"), 2)
      << v.run.out;
}

// --- A skip in a thread the rank started. ---

TEST_P(NoFalsePassTest, SkipInAThreadARankStartedIsNoPass) {
  Verdict v = Run("SkipsInAThreadItStarted/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string(Threads() ? "rank 0" : "rank 1") +
                        " of 2 skipped (\""))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-thread-skip\") while the other "
                                   "ranks ran"))
      << v.run.out;
}

// --- HasFailure() and its kin in a rank. ---

TEST_P(NoFalsePassTest, HasFailureAndItsKinAnswerForTheRank) {
  Verdict v = Run("AsksWhetherIt*");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-wrong-answer"))) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(At("marker-helper-failed", "[rank 1/2]") +
                                   "Failed\nmarker-helper-failed"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(Line("marker-nonfatal") +
                                   ": Failure\n[rank 0/2] Expected equality"))
      << v.run.out;
  EXPECT_THAT(
      v.run.out,
      HasSubstr("[  SKIPPED ] NoFalsePassSkipsFirst.AsksWhetherItSkipped"
                "/2ranks"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-fixture-nonfatal")) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] NoFalsePassAsksInAFixture."
                                   "AsksWhetherItFailed/2ranks"))
      << v.run.out;
}

// A rank that other code of the test process reaped: how it ended is
// unknown, which is said, and its peers are told at once (not left to wait
// for it until their timeout).
TEST_P(NoFalsePassTest, RankReapedByTheTestsOwnHandlerIsSaidAtOnce) {
  Verdict v = Run("RankOneExits/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("was reaped by other code in the test process (a "
                        "SIGCHLD handler, or a wait() or waitpid(-1) the test "
                        "or a library made), so how it ended is unknown"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("timed out"))) << v.run.out;
}

// --- Messages. ---

TEST_P(NoFalsePassTest, RanksThatPrintedNothingAreOneLine) {
  const std::string dir = TempPath(".logs");
  Verdict v = Run("SilentRanksFail/4ranks", {{"DISTTEST_LOG_DIR", dir}});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  // Rank threads write to one output: one log, theirs.
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string(Threads() ? "[ disttest ] the rank threads"
                                              : "[ disttest ] ranks 0-3") +
                        " printed nothing (their logs: " + dir +
                        "/NoFalsePass.SilentRanksFail/4ranks)"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("the last 0 lines")));
}

TEST_P(NoFalsePassTest, ExitZeroMidBodyIsSaidOneWay) {
  Verdict v = Run("ExitZeroMidBody/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  // A rank thread's exit() ends every rank's thread: said, with whose it
  // was.
  EXPECT_THAT(
      v.run.out,
      HasSubstr(Threads() ? "[rank 1/2] (first failure) rank 1's thread "
                            "called exit() (exited with status 0)"
                          : "[rank 1/2] (first failure) exited with status "
                            "0 before the test body finished"))
      << v.run.out;
  // (Rank threads start together: rank 0 may still be in disttest's
  // barrier when rank 1 has left it; where is then told otherwise.)
  if (!Threads()) {
    EXPECT_THAT(v.run.out,
                HasSubstr("rank 1 is not in it: its last collective, #0 "
                          "barrier() (disttest's, before the body), completed"))
        << v.run.out;
  }
  EXPECT_THAT(v.run.out, HasSubstr("; it ended: exited with status 0 "
                                   "before the test body finished"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("it ended: passed"))) << v.run.out;
}

// Where the ranks are threads, quick_exit() is said as exit() is, with
// whose it was; an _exit() no handler sees is said as the process's end
// by no rank's exit(), not as each rank's own.
TEST_P(NoFalsePassTest, QuickExitOrUnderscoreExitMidBodyIsSaid) {
  Verdict quick = Run("QuickExitMidBody/2ranks");
  EXPECT_EQ(quick.run.exit_code, 1) << quick.run.out;
  EXPECT_THAT(quick.run.out,
              HasSubstr(Threads() ? "[rank 1/2] (first failure) rank 1's "
                                    "thread called quick_exit() (exited with "
                                    "status 0)"
                                  : "[rank 1/2] (first failure) exited with "
                                    "status 0 before the test body finished"))
      << quick.run.out;
  Verdict bare = Run("UnderscoreExitMidBody/2ranks");
  EXPECT_EQ(bare.run.exit_code, 1) << bare.run.out;
  EXPECT_THAT(bare.run.out,
              HasSubstr(Threads() ? "the process of every rank's thread "
                                    "exited with status 0 while the test "
                                    "ran, by no rank's exit(): an _exit(), "
                                    "or a thread that no rank runs"
                                  : "[rank 1/2] (first failure) exited with "
                                    "status 0 before the test body finished"))
      << bare.run.out;
}

// A status that disttest's own code uses (81: failed, 82: skipped, 83:
// could not set up, 84: could not re-execute), chosen by the test's code,
// is said as any other: not "its report was lost".
TEST_P(NoFalsePassTest, ExitWithAStatusOfDisttestsInTheBodyIsTheTests) {
  for (const char* status : {"81", "82", "83", "84"}) {
    Verdict v =
        Run("ExitsWithAStatusOfDisttests/2ranks", {{"NFP_STATUS", status}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(v.run.out,
                HasSubstr(std::string("exited with status ") + status +
                          (Threads() ? ")"
                                     : " before the "
                                       "test body "
                                       "finished")))
        << v.run.out;
    for (const char* wrong : {"report was lost", "could not set the rank up",
                              "could not be re-executed"}) {
      EXPECT_THAT(v.run.out, Not(HasSubstr(wrong))) << v.run.out;
    }
  }
}

// While a peer works outside any collective, such an exit is no skip or
// failure of disttest's either: the peer is ended after the failure grace
// of an exit, and for the exit, not five of them for a skip.
TEST_P(NoFalsePassTest, ExitWithAStatusOfDisttestsIsNoSkipToItsPeers) {
  if (Threads()) {
    GTEST_SKIP() << "a rank thread's exit() ends every rank "
                    "(ExitWithAStatusOfDisttestsInTheBodyIsTheTests covers "
                    "what is said)";
  }
  for (const char* status : {"81", "82"}) {
    Verdict v = Run("ExitsWithAStatusOfDisttestsWhileAPeerWorks/2ranks",
                    {{"NFP_STATUS", status}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr(std::string("still running 300 ms after "
                                                 "rank 1 exited with status ") +
                                     status))
        << v.run.out;
  }
}

// After the body, an exit is said as where it came: not "before the test
// body finished".
TEST_P(NoFalsePassTest, ExitZeroInTearDownRankIsSaidAfterTheBody) {
  if (Threads()) {
    GTEST_SKIP() << "a rank thread's _exit() ends every rank (ExitZeroMidBody "
                    "covers what is said)";
  }
  Verdict v = Run("ExitZeroAfterTheBody/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] exited with status 0 after its body "
                        "returned, in TearDownRank(), TearDown() or the "
                        "fixture's destructor"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("before the test body finished")))
      << v.run.out;
}

// A partial skip is the cause: printed first, and streamed as the first
// failure, before what its peer's collective then saw.
TEST_P(NoFalsePassTest, PartialSkipComesBeforeWhatItCaused) {
  Verdict v = Run("OneRankSkips/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  if (!GetParam().pooled) {
    // (A pooled rank parks: its peer waits out the grace after a skip, and
    // is ended, which is no failure of its own to stream.)
    EXPECT_THAT(v.run.out, HasSubstr("first failure, rank 1 after "))
        << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr(": it skipped (\"marker-partial-skip\") "
                                     "while the other ranks ran\n"))
        << v.run.out;
  }
  // Where the policy is set (trial 13 set it in SetUpRank(), too late).
  EXPECT_THAT(v.run.out,
              HasSubstr("set options().skip_policy = "
                        "disttest::SkipPolicy::kAllowPartial in the fixture's "
                        "constructor to allow it"))
      << v.run.out;
  const std::size_t skip = v.run.out.find("rank 1 of 2 skipped");
  const std::size_t consequence = v.run.out.find("[rank 0/2] ");
  ASSERT_NE(skip, std::string::npos) << v.run.out;
  ASSERT_NE(consequence, std::string::npos) << v.run.out;
  EXPECT_LT(skip, consequence) << v.run.out;
}

// Every rank skipped, one after a failure: that failure is the test's,
// first; no partial skip is said (nor its kAllowPartial, which would not
// make it pass).
TEST_P(NoFalsePassTest, AFailureBeforeASkipOnEveryRankIsNoPartialSkip) {
  Verdict v = Run("EveryRankSkipsOneAfterAFailure/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-failure-before-the-skip"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("every rank skipped (skipped everywhere), "
                                   "but rank 1 failed before it skipped: the "
                                   "test fails for that"))
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("kAllowPartial"))) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("while the other ranks ran")))
      << v.run.out;
}

TEST_P(NoFalsePassTest, EachRanksOwnValueAtOneLineIsOneTable) {
  Verdict v = Run("EachRankItsOwnValue/8ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-own-value", "[ranks 1-7 of 8]") +
                        "Expected equality of these values:\n  rank()\n    "
                        "Which is: (each rank's, below)\n  0\n  rank 1: 1\n"
                        "  rank 2: 2\n"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("\n  rank 7: 7\n")) << v.run.out;
  // One finding, not seven.
  EXPECT_EQ(Occurrences(v.run.out, " of 8] Expected equality of these"), 1)
      << v.run.out;
}

TEST_P(NoFalsePassTest, AForkOfARankIsNamedByItsBinaryNotTheZygote) {
  Verdict v = Run("LeavesAForkRunning/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // The rank's note, on its stderr.
  const bool exec = std::string(GetParam().setup.name) == "exec";
  EXPECT_THAT(v.run.err, HasSubstr(exec ? ", a fork of a kExec rank), which "
                                          "the test started and left running"
                                        : "), which the test started and left "
                                          "running"))
      << v.run.err;
  EXPECT_THAT(v.run.err, Not(HasSubstr("disttest-zygote"))) << v.run.err;
}

// SIGTERM while the parent reports a verdict of many failures: the report
// is whole, the tests after it are skipped, gtest writes its XML, and the
// process then ends by SIGTERM.
TEST_P(NoFalsePassTest, SigtermWhileReportingFinishesTheReportAndTheXml) {
  Verdict v = Run("ManyFailuresReported/2ranks:NoFalsePass.AfterManyFailures/*",
                  {{"VERDICTS_TERM_WHILE_REPORTING", "1"}});
  EXPECT_EQ(v.run.signal, SIGTERM) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-sigterm-while-reporting"));
  EXPECT_THAT(v.run.out, HasSubstr("the tests after it are skipped, gtest "
                                   "writes its XML and JSON"))
      << v.run.out;
  // Each rank's 200 failures, the last too, in the output and the XML.
  EXPECT_THAT(v.run.out, HasSubstr("marker-report-failure 199")) << v.run.out;
  const std::string tc = TestCaseXml(v.xml, "ManyFailuresReported/2ranks");
  EXPECT_EQ(Occurrences(tc, "<failure "), 200) << v.xml;
  EXPECT_THAT(tc, HasSubstr("marker-report-failure 199"));
  EXPECT_THAT(TestCaseXml(v.xml, "AfterManyFailures/2ranks"),
              HasSubstr("result=\"skipped\""))
      << v.xml;
}

// --- Expected ends. ---

// A rank that ends as expected made a call that differed before its end:
// compared all the same (trial 12: it passed, its calls no one's to
// compare).
TEST_P(NoFalsePassTest, CallThatDifferedBeforeAnExpectedEndFails) {
  if (Threads()) {
    GTEST_SKIP() << "cannot apply to ranks that are threads: a thread cannot "
                    "end alone (ExpectRankToEnd is refused)";
  }
  Verdict v = Run("CallThatDiffersBeforeAnExpectedEnd/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("collective #0 on mine did not match across the "
                        "ranks, though every call returned (the data is not "
                        "what the test meant):\n  rank 0 called allreduce(1 x "
                        "int32, sum) at " +
                        Line("marker-before-end") +
                        "\n  rank 1 called allreduce(1 x int32, max) at " +
                        Line("marker-before-end")))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("exited with status 3, as the test "
                                   "expected"))
      << v.run.out;
}

TEST_P(NoFalsePassTest, EndDeclaredAfterItCameFailsTheTest) {
  if (Threads()) {
    GTEST_SKIP() << "cannot apply to ranks that are threads: a thread cannot "
                    "end alone (ExpectRankToEnd is refused)";
  }
  Verdict v = Run("EndExpectedAfterItCame/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] had already ended (killed by "
                                   "signal 9 (SIGKILL)) when rank 0 declared "
                                   "ExpectRankToEnd(1, ...), "))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("declare an end before it can come"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("as the test expected")));
}

TEST_P(NoFalsePassTest, EndDeclaredOnHearingOfItFailsTheTest) {
  if (Threads()) {
    GTEST_SKIP() << "cannot apply to ranks that are threads: a thread cannot "
                    "end alone (ExpectRankToEnd is refused)";
  }
  for (const char* arena : {"0", "1"}) {
    Verdict v = Run("EndExpectedJustAfterItCame/2ranks",
                    {{"DISTTEST_NO_HOST_ARENA", arena}});
    EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] had already ended"))
        << v.run.out;
    EXPECT_THAT(v.run.out, Not(HasSubstr("as the test expected")));
  }
}

// --- A ::testing::Environment: set up for every rank, torn down once. ---

TEST_P(NoFalsePassTest, EnvironmentSetUpRunsForEveryRankTearDownOnlyInTheTest) {
  Verdict v =
      Run("EnvironmentIsSetUpInEveryRank/2ranks", {{"VERDICTS_ENV", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // The test process: once each.
  EXPECT_EQ(Occurrences(v.run.out, "marker-env-setup in_rank=0"), 1)
      << v.run.out;
  EXPECT_EQ(Occurrences(v.run.out, "marker-env-teardown in_rank=0"), 1)
      << v.run.out;
  // A re-executed rank sets it up itself; a forked or pooled one is a copy
  // of the test process made after it. No rank tears it down.
  const bool exec = std::string(GetParam().setup.name) == "exec";
  EXPECT_EQ(Occurrences(v.run.out, "marker-env-setup in_rank=1"), exec ? 2 : 0)
      << v.run.out;
  EXPECT_EQ(Occurrences(v.run.out, "marker-env-teardown in_rank=1"), 0)
      << v.run.out;
}

// --- Timeouts. ---

// An Environment's SetUp() runs again in a re-executed rank (elsewhere only
// in the test process, where InRank() is false): its failure there fails
// the rank's test.
TEST_P(NoFalsePassTest, FailureOfAnEnvironmentInARankFailsItsTest) {
  Verdict v = Run("EnvironmentIsSetUpInEveryRank/2ranks",
                  {{"VERDICTS_ENV_FAILS", "1"}});
  if (std::string(GetParam().setup.launch) != "exec") {
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    return;
  }
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr(At("marker-env-failure", "[ranks 0-1 of 2]") +
                        "Failed\nmarker-env-failure"))
      << v.run.out;
  // After a skip or a fatal failure there gtest runs no test in the rank:
  // the rank reports it all the same (it said "exited with status 0 before
  // the test body finished"), a skip of every rank as the test's skip.
  Verdict skip = Run("EnvironmentIsSetUpInEveryRank/2ranks",
                     {{"VERDICTS_ENV_FAILS", "skip"}});
  EXPECT_EQ(skip.run.exit_code, 0) << skip.run.out;
  EXPECT_THAT(skip.run.out, HasSubstr("all 2 ranks skipped: marker-env-skip"))
      << skip.run.out;
  EXPECT_THAT(skip.run.out, HasSubstr("[  SKIPPED ] 1 test")) << skip.run.out;
  Verdict fatal = Run("EnvironmentIsSetUpInEveryRank/2ranks",
                      {{"VERDICTS_ENV_FAILS", "fatal"}});
  EXPECT_EQ(fatal.run.exit_code, 1) << fatal.run.out;
  EXPECT_THAT(fatal.run.out,
              HasSubstr(At("marker-env-fatal", "[ranks 0-1 of 2]") +
                        "Failed\nmarker-env-fatal"))
      << fatal.run.out;
  EXPECT_THAT(fatal.run.out, Not(HasSubstr("before the test body finished")))
      << fatal.run.out;
}

TEST_P(NoFalsePassTest, TimeoutOfMillisecondsMaxMeansNoLimit) {
  Verdict v = Run("TimeoutOfMaxIsNoLimit/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // Cut to the longest deadline disttest keeps: 10^7 s.
  EXPECT_THAT(v.run.out, HasSubstr("marker-endless-timeout 10000000000"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("timed out")));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, NoFalsePassTest,
    ::testing::Values(
        Mode{{"fork", DISTTEST_NO_FALSE_PASS_CHILD, "fork", ""}, false},
        Mode{{"exec", DISTTEST_NO_FALSE_PASS_CHILD, "exec", ""}, false},
        Mode{{"threads", DISTTEST_NO_FALSE_PASS_CHILD, "threads", ""}, false},
        Mode{{"fork", DISTTEST_NO_FALSE_PASS_CHILD, "fork", ""}, true}),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return std::string(info.param.setup.name) +
             (info.param.pooled ? "Pooled" : "");
    });

}  // namespace
}  // namespace disttest::testing
