// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Judge() on made-up rank reports: every rule of the verdict, without
// processes. The same rules are checked end to end in tests/self.
#include "harness/report/verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "comm/ledger_area.h"

namespace disttest::internal {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

using Kind = Finding::Kind;

TestSpec Spec(int world_size) {
  TestSpec spec;
  spec.name = "S.T/" + std::to_string(world_size) + "ranks";
  spec.file = "t.cc";
  spec.line = 10;
  spec.world_size = world_size;
  return spec;
}

// A rank that ended as the harness ends it, with exit `code`.
RankReport Ended(int rank, RankVerdict verdict, int code) {
  RankReport r;
  r.rank = rank;
  r.done = verdict;
  r.outcome = RankOutcome::FromWaitStatus(code << 8);
  return r;
}

RankReport Passed(int rank) { return Ended(rank, RankVerdict::kPassed, 0); }

RankReport Skipped(int rank, const char* why) {
  RankReport r = Ended(rank, RankVerdict::kSkipped, kExitSkipped);
  r.results.push_back({RankMessage::Kind::kSkip, "s.cc", 5, why});
  return r;
}

// ExpectRankToEnd: rank 2 was to be killed by SIGKILL.
RankReport ExpectedKill(int rank, int declared_by) {
  RankReport r;
  r.rank = rank;
  r.expected_end = ExpectedEnd{true, SIGKILL, declared_by};
  r.outcome = RankOutcome::FromWaitStatus(SIGKILL);
  return r;
}

// A leak check that dies (it cannot stop the rank's threads) ends the rank
// with the runtime's exit status, and its report went into disttest's
// file: the ledger's phase says where the rank was.
TEST(JudgeTest, ARankThatDiesInItsLeakCheckIsSaidToHaveDiedThere) {
  RankReport r;
  r.rank = 1;
  r.outcome = RankOutcome::FromWaitStatus(23 << 8);
  r.ledger.emplace();
  r.ledger->phase_ns[static_cast<std::size_t>(RankPhase::kCheckingLeaks)] = 5;
  auto f = Judge(Spec(2), {Passed(0), r});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_THAT(f[0].message, HasSubstr("[rank 1/2] exited with status 23"));
  EXPECT_THAT(f[0].message,
              HasSubstr("; it ended in LeakSanitizer's leak check after its "
                        "body (the check itself failed"));
  r.ledger->phase_ns[static_cast<std::size_t>(RankPhase::kCheckingLeaks)] = 0;
  EXPECT_THAT(Judge(Spec(2), {Passed(0), r})[0].message,
              Not(HasSubstr("LeakSanitizer")));
}

TEST(JudgeTest, AnExpectedEndIsANoteNotAFailure) {
  const RankReport r2 = ExpectedKill(2, 0);
  EXPECT_TRUE(EndedAsExpected(r2));
  EXPECT_FALSE(RankFailed(r2));
  auto f = Judge(Spec(3), {Passed(0), Passed(1), r2});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kNote);
  EXPECT_EQ(f[0].message,
            "[rank 2/3] killed by signal 9 (SIGKILL), as the test expected "
            "(ExpectRankToEnd)");
}

TEST(JudgeTest, AnEndOtherThanTheExpectedOneFailsNamingBoth) {
  RankReport aborted = ExpectedKill(1, 0);
  aborted.outcome = RankOutcome::FromWaitStatus(SIGABRT);
  RankReport finished = ExpectedKill(1, 1);
  finished.done = RankVerdict::kPassed;
  finished.outcome = RankOutcome::FromWaitStatus(0);
  RankReport exited = ExpectedKill(1, 0);
  exited.expected_end = ExpectedEnd{false, 3, 0};
  exited.outcome = RankOutcome::FromWaitStatus(4 << 8);
  // disttest's own kill is no expected end, and says why itself.
  RankReport killed = ExpectedKill(1, 0);
  killed.killed_because = "the test timed out after 3000 ms";
  const std::vector<std::pair<RankReport, std::string>> cases = {
      {aborted,
       "[rank 1/2] was expected to be killed by signal 9 (SIGKILL) "
       "(ExpectRankToEnd in rank 0), but it was killed by signal 6 "
       "(SIGABRT)"},
      {finished,
       "[rank 1/2] was expected to be killed by signal 9 (SIGKILL) "
       "(ExpectRankToEnd in rank 1), but it finished the test (passed) and "
       "exited with status 0"},
      {exited,
       "[rank 1/2] was expected to exit with status 3 (ExpectRankToEnd in "
       "rank 0), but it exited with status 4"},
      {killed,
       "[rank 1/2] was killed by disttest: the test timed out after 3000 "
       "ms"},
  };
  for (const auto& [r, text] : cases) {
    EXPECT_FALSE(EndedAsExpected(r)) << text;
    EXPECT_TRUE(RankFailed(r)) << text;
    auto f = Judge(Spec(2), {Passed(0), r});
    ASSERT_THAT(f, SizeIs(1)) << text;
    EXPECT_EQ(f[0].kind, Kind::kFatalFailure);
    EXPECT_EQ(f[0].message, text);
  }
}

TEST(JudgeTest, FailuresBeforeAnExpectedEndStillCount) {
  RankReport r1 = ExpectedKill(1, 0);
  r1.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 7, "bad"});
  EXPECT_TRUE(RankFailed(r1));
  auto f = Judge(Spec(2), {Passed(0), r1});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message, "[rank 1/2] bad");
  EXPECT_EQ(f[1].kind, Kind::kNote);
}

TEST(ExpectedEndTest, TextRoundTripsAndAnythingElseIsRefused) {
  const auto back =
      DecodeExpectedEnd(EncodeExpectedEnd(3, {false, 7, -1, 123456789012}));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->first, 3);
  EXPECT_FALSE(back->second.signal);
  EXPECT_EQ(back->second.value, 7);
  EXPECT_EQ(back->second.declared_ns, 123456789012);
  EXPECT_FALSE(back->second.after_end);
  ExpectedEnd late{true, 9, -1, 42};
  late.after_end = true;
  const auto ended = DecodeExpectedEnd(EncodeExpectedEnd(1, late));
  ASSERT_TRUE(ended.has_value());
  EXPECT_TRUE(ended->second.after_end);
  EXPECT_EQ(ended->second.declared_ns, 42);
  EXPECT_TRUE(DecodeExpectedEnd("1 signal 9 0").has_value());
  for (const char* bad :
       {"", "1", "1 signal", "x signal 9 0", "1 kill 9 0", "1 signal 9x 0",
        "1  signal 9 0", "1 exit ", "1 signal 9", "1 signal 9 -5",
        "1 signal 9 12x", "1 signal 9 1234567890123456789012"}) {
    EXPECT_FALSE(DecodeExpectedEnd(bad).has_value()) << bad;
  }
}

TEST(JudgeTest, AllPassedIsClean) {
  EXPECT_THAT(Judge(Spec(2), {Passed(0), Passed(1)}), SizeIs(0));
}

TEST(JudgeTest, FailureIsReraisedAtItsLocationWithTheRank) {
  RankReport r1 = Ended(1, RankVerdict::kFailed, kExitFailed);
  r1.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 7, "bad"});
  auto f = Judge(Spec(2), {Passed(0), r1});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFailure);
  EXPECT_EQ(f[0].file, "x.cc");
  EXPECT_EQ(f[0].line, 7);
  EXPECT_EQ(f[0].message, "[rank 1/2] bad");
}

TEST(JudgeTest, ResultWithoutLocationIsPlacedAtTheTest) {
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.results.push_back({RankMessage::Kind::kFatalFailure, "", -1, "boom"});
  auto f = Judge(Spec(1), {r0});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFatalFailure);
  EXPECT_EQ(f[0].file, "t.cc");
  EXPECT_EQ(f[0].line, 10);
}

TEST(JudgeTest, SignalAndEarlyExitAndKillAreFatalAndNamed) {
  RankReport sig;
  sig.rank = 0;
  sig.outcome = RankOutcome::FromWaitStatus(SIGSEGV);
  RankReport early;
  early.rank = 1;
  early.outcome = RankOutcome::FromWaitStatus(3 << 8);
  RankReport killed;
  killed.rank = 2;
  killed.outcome = RankOutcome::FromWaitStatus(SIGKILL);
  killed.killed_because = "the test timed out after 5 ms";
  auto f = Judge(Spec(3), {sig, early, killed});
  ASSERT_THAT(f, SizeIs(3));
  EXPECT_EQ(f[0].message, "[rank 0/3] killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(f[1].message,
            "[rank 1/3] exited with status 3 before the test body finished");
  EXPECT_EQ(f[2].message,
            "[rank 2/3] was killed by disttest: the test timed out after 5 ms");
  for (const Finding& x : f) EXPECT_EQ(x.kind, Kind::kFatalFailure);
}

TEST(JudgeTest, ExitCodeThatContradictsTheReportIsAFailure) {
  RankReport r = Ended(0, RankVerdict::kPassed, 7);
  auto f = Judge(Spec(1), {r});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_THAT(f[0].message,
              HasSubstr("exited with status 7 after reporting that it passed"));
}

TEST(JudgeTest, AllSkippedIsASkipWithTheMessage) {
  auto f = Judge(Spec(2), {Skipped(0, "no gpu"), Skipped(1, "no gpu")});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kSkip);
  EXPECT_EQ(f[0].message, "all 2 ranks skipped: no gpu");
  EXPECT_EQ(f[0].file, "s.cc");
}

TEST(JudgeTest, PartialSkipFailsByDefaultAndIsANoteWhenAllowed) {
  TestSpec spec = Spec(4);
  std::vector<RankReport> ranks = {Passed(0), Skipped(1, "why"), Passed(2),
                                   Skipped(3, "why")};
  auto f = Judge(spec, ranks);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFailure);
  EXPECT_THAT(f[0].message,
              HasSubstr("ranks 1, 3 of 4 skipped (\"why\") while the other "
                        "ranks ran"));
  spec.options.skip_policy = SkipPolicy::kAllowPartial;
  f = Judge(spec, ranks);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kNote);
}

TEST(JudgeTest, EveryDistinctSkipReasonIsKeptWithItsRanks) {
  auto f = Judge(Spec(4), {Skipped(0, "no gpu"), Skipped(1, "no disk"),
                           Skipped(2, "no gpu"), Skipped(3, "no gpu")});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kSkip);
  EXPECT_EQ(f[0].message,
            "all 4 ranks skipped: ranks 0, 2-3: no gpu; rank 1: no disk");
  f = Judge(Spec(4),
            {Passed(0), Skipped(1, "a"), Skipped(2, "b"), Skipped(3, "a")});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFailure);
  EXPECT_THAT(f[0].message,
              HasSubstr("ranks 1, 2, 3 of 4 skipped (ranks 1, 3: \"a\"; rank "
                        "2: \"b\") while the other ranks ran"));
}

// A rank that failed and then skipped did not run on: said so, not "while
// the other ranks ran".
TEST(JudgeTest, PartialSkipBesideARankThatFailedThenSkippedSaysSo) {
  RankReport r1 = Ended(1, RankVerdict::kFailed, kExitFailed);
  r1.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 1, "no"});
  r1.results.push_back({RankMessage::Kind::kSkip, "x.cc", 2, "then skip"});
  auto f = Judge(Spec(3), {Skipped(0, "then skip"), r1, Passed(2)});
  EXPECT_THAT(f, Contains(Field(&Finding::message,
                                HasSubstr("rank 0 of 3 skipped (\"then "
                                          "skip\") while rank 1 failed before "
                                          "it skipped too"))));
}

// Every rank skipped, one after a failure: no partial skip (its
// kAllowPartial would not make the test pass); that failure is the test's.
TEST(JudgeTest, EveryRankSkippedOneAfterAFailureIsNoPartialSkip) {
  RankReport r1 = Ended(1, RankVerdict::kFailed, kExitFailed);
  r1.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 1, "no"});
  r1.results.push_back({RankMessage::Kind::kSkip, "x.cc", 2, "then skip"});
  auto f = Judge(Spec(2), {Skipped(0, "then skip"), r1});
  EXPECT_THAT(f, Contains(Field(&Finding::kind, Kind::kFailure)));
  EXPECT_THAT(
      f, Contains(AllOf(Field(&Finding::kind, Kind::kNote),
                        Field(&Finding::message,
                              HasSubstr("every rank skipped (then skip), but "
                                        "rank 1 failed before it skipped: the "
                                        "test fails for that")))));
  EXPECT_THAT(
      f, Not(Contains(Field(&Finding::message, HasSubstr("kAllowPartial")))));
}

// A skip beside a passed verdict (where the ranks are threads, a thread
// that no rank runs tells rank 0) makes the rank skipped, as in gtest.
TEST(JudgeTest, SkipBesideAPassedVerdictIsASkip) {
  RankReport r0 = Passed(0);
  r0.results.push_back({RankMessage::Kind::kSkip, "x.cc", 2, "from a thread"});
  auto partial = Judge(Spec(2), {r0, Passed(1)});
  ASSERT_THAT(partial, SizeIs(1));
  EXPECT_EQ(partial[0].kind, Kind::kFailure);
  EXPECT_THAT(partial[0].message,
              HasSubstr("rank 0 of 2 skipped (\"from a thread\") while the "
                        "other ranks ran"));
  auto all = Judge(Spec(2), {r0, Skipped(1, "from a thread")});
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].kind, Kind::kSkip);
}

TEST(JudgeTest, FailureOutranksSkip) {
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 1, "no"});
  r0.results.push_back({RankMessage::Kind::kSkip, "x.cc", 2, "then skip"});
  auto f = Judge(Spec(1), {r0});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFailure);
}

TEST(JudgeTest, FailureWhoseMessagesWereLostIsStillAFailure) {
  // The rank says it failed and exits so, but no failure reached the parent
  // (its queue was full or broken): the test must not pass.
  auto f =
      Judge(Spec(2), {Passed(0), Ended(1, RankVerdict::kFailed, kExitFailed)});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].kind, Kind::kFatalFailure);
  EXPECT_THAT(f[0].message,
              HasSubstr("[rank 1/2] reported that it failed, but its failure "
                        "messages were lost"));
}

TEST(JudgeTest, ExitWithoutReportIsExplainedByItsCode) {
  auto without_report = [](int code) {
    RankReport r;
    r.outcome = RankOutcome::FromWaitStatus(code << 8);
    return Judge(Spec(1), {r}).at(0).message;
  };
  EXPECT_THAT(without_report(kExitHarnessError),
              HasSubstr("disttest could not set the rank up"));
  EXPECT_THAT(without_report(kExitExecFailed),
              HasSubstr("could not be re-executed"));
  EXPECT_THAT(without_report(kExitFailed),
              HasSubstr("(it failed), but its report was lost"));
  EXPECT_THAT(without_report(0),
              HasSubstr("exited with status 0 before the test body finished"));
}

TEST(JudgeTest, RankNotStartedOrOfUnknownEndIsNamed) {
  RankReport a;
  a.rank = 0;
  a.not_started = "cannot fork rank 0/2: Resource temporarily unavailable";
  RankReport b;
  b.rank = 1;
  auto f = Judge(Spec(2), {a, b});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message,
            "[rank 0/2] was not started: cannot fork rank 0/2: Resource "
            "temporarily unavailable");
  EXPECT_EQ(f[1].message, "[rank 1/2] ended, but how is unknown");
}

TEST(JudgeTest, ChannelErrorsAreReported) {
  RankReport r = Passed(0);
  r.channel_errors.push_back("result message has unknown kind 9");
  auto f = Judge(Spec(1), {r});
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].message, "[rank 0/1] result message has unknown kind 9");
}

// A failed rank whose one failure came `ms` after `t0`.
// `follows`: the rank marked it as reporting an error a peer caused
// (comm/peer_errors.h).
RankReport FailedWith(int rank, const std::string& text,
                      std::chrono::steady_clock::time_point t0, int ms,
                      bool follows = false) {
  RankReport r = Ended(rank, RankVerdict::kFailed, kExitFailed);
  r.results.push_back(
      {RankMessage::Kind::kFatalFailure, "x.cc", 7, text, follows});
  r.received.push_back(t0 + std::chrono::milliseconds(ms));
  r.ended_at = t0 + std::chrono::milliseconds(ms + 1);
  return r;
}

TEST(JudgeTest, TheSameFailureOfManyRanksIsOneFindingWithTheirRanks) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RankReport> ranks;
  for (int r = 0; r < 256; ++r) {
    // Each message carries its rank's own label, as a CommError's does.
    ranks.push_back(
        r == 16 ? FailedWith(r, "other", t0, 1)
                : FailedWith(r,
                             "threw: [rank " + std::to_string(r) +
                                 "/256] barrier failed: rank 3 ended while "
                                 "its peers waited for it in a collective",
                             t0, 2 + r % 7, /*follows=*/true));
  }
  auto f = Judge(Spec(256), ranks);
  ASSERT_THAT(f, SizeIs(2));
  // The root cause first (it came first, and the rest follows from rank 3),
  // marked; the 255 ranks' identical failure once, without their labels.
  EXPECT_EQ(f[0].message, "[rank 16/256] (first failure) other");
  EXPECT_EQ(f[1].message,
            "[ranks 0-15, 17-255 of 256] threw: barrier failed: rank 3 ended "
            "while its peers waited for it in a collective");
  EXPECT_EQ(f[1].kind, Kind::kFatalFailure);
  EXPECT_EQ(f[1].file, "x.cc");
  EXPECT_EQ(f[1].line, 7);
}

// Every rank failing at one line and then at the next (two collective
// assertions, say) is no question of which rank caused what: unmarked,
// however far apart the two came (under load, 10 ms and more).
TEST(JudgeTest, TheSameRanksFailingTwiceMarkNoFirstFailure) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RankReport> ranks;
  for (int r = 0; r < 3; ++r) {
    RankReport report = FailedWith(r, "first line", t0, 1 + r);
    report.results.push_back(
        {RankMessage::Kind::kFatalFailure, "x.cc", 8, "second line"});
    report.received.push_back(t0 + std::chrono::milliseconds(60 + r));
    ranks.push_back(report);
  }
  auto f = Judge(Spec(3), ranks);
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message, "[ranks 0-2 of 3] first line");
  EXPECT_EQ(f[1].message, "[ranks 0-2 of 3] second line");
  // Some of them failing again later: still the program's order.
  {
    RankReport r0 = FailedWith(0, "first line", t0, 1);
    r0.results.push_back(
        {RankMessage::Kind::kFatalFailure, "x.cc", 8, "only rank 0"});
    r0.received.push_back(t0 + std::chrono::milliseconds(60));
    auto g = Judge(Spec(2), {r0, FailedWith(1, "first line", t0, 2)});
    ASSERT_THAT(g, SizeIs(2));
    EXPECT_EQ(g[0].message, "[ranks 0-1 of 2] first line");
  }
  // One rank more failing elsewhere: then the first is marked.
  RankReport other = FailedWith(3, "elsewhere", t0, 200);
  ranks.push_back(other);
  f = Judge(Spec(4), ranks);
  ASSERT_THAT(f, SizeIs(3));
  EXPECT_EQ(f[0].message, "[ranks 0-2 of 4] (first failure) first line");
}

TEST(JudgeTest, FailuresGoInTheOrderTheyCameConsequencesLast) {
  const auto t0 = std::chrono::steady_clock::now();
  RankReport r0 = FailedWith(
      0,
      "barrier failed: rank 2 gave up waiting in the host arena (see its "
      "error); the arena cannot be used after that",
      t0, 1, /*follows=*/true);
  RankReport r1 = FailedWith(1, "late", t0, 90);
  RankReport r2 = FailedWith(2, "timed out waiting for rank 1", t0, 40);
  RankReport r3 = Ended(3, RankVerdict::kFailed, kExitFailed);
  r3.killed_because = "still running 2000 ms after rank 2 failed";
  r3.killed_for = RankReport::KilledFor::kPeersFailure;
  r3.ended_at = t0;  // Even when it comes first: it followed from rank 2.
  auto f = Judge(Spec(4), {r0, r1, r2, r3});
  ASSERT_THAT(f, SizeIs(4));
  EXPECT_EQ(f[0].message,
            "[rank 2/4] (first failure) timed out waiting for rank 1");
  EXPECT_EQ(f[1].message, "[rank 1/4] late");
  EXPECT_THAT(f[2].message, HasSubstr("[rank 3/4] was killed by disttest"));
  EXPECT_THAT(f[3].message, HasSubstr("[rank 0/4] barrier failed: rank 2"));
}

TEST(JudgeTest, FailuresAtTheSameMomentAreNotRanked) {
  const auto t0 = std::chrono::steady_clock::now();
  auto f =
      Judge(Spec(2), {FailedWith(0, "a", t0, 1), FailedWith(1, "b", t0, 3)});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message, "[rank 0/2] a");
  EXPECT_EQ(f[1].message, "[rank 1/2] b");
}

TEST(JudgeTest, WithoutTimesFailuresKeepTheRanksOrderAndStillGroup) {
  // Launched mode: rank 0 gathers the reports, and nothing says when.
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.results.push_back({RankMessage::Kind::kNonFatalFailure, "x.cc", 7, "b"});
  RankReport r1 = r0, r2 = r0;
  r1.rank = 1;
  r2.rank = 2;
  r2.results[0].message = "a";
  // Twice the same failure on one rank stays twice.
  r2.results.push_back(r2.results[0]);
  auto f = Judge(Spec(3), {r0, r1, r2});
  ASSERT_THAT(f, SizeIs(3));
  EXPECT_EQ(f[0].message, "[ranks 0-1 of 3] b");
  EXPECT_EQ(f[1].message, "[rank 2/3] a");
  EXPECT_EQ(f[2].message, "[rank 2/3] a");
}

// A stack the tree can read (eu-stack's format).
std::string StackAt(const std::string& where) {
  return "TID 1:\n#0  0x1 " + where + "\n#1  0x1 main\n";
}

TEST(JudgeTest, TwoOrMoreStacksAreOneTreeOfTheStuckRanksOnly) {
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.done.reset();
  r0.killed_because = "the test timed out after 300 ms";
  r0.stack = StackAt("wait");
  RankReport r2 = r0;
  r2.rank = 2;
  r2.stack = StackAt("pause");
  // Finished while the stacks were taken: judged by its verdict, and not in
  // the tree (its stack was taken, but it is not stuck).
  RankReport r1 = Passed(1);
  r1.killed_after_done = true;
  r1.stack = StackAt("exit");
  auto f = Judge(Spec(3), {r0, r1, r2});
  ASSERT_THAT(f, SizeIs(4));
  EXPECT_EQ(f[0].message,
            "[ranks 0, 2 of 3] was killed by disttest: the test timed out "
            "after 300 ms; where it was: in the stacks below");
  EXPECT_EQ(f[1].kind, Kind::kProperty);
  EXPECT_EQ(f[1].message, "rank0.disttest_stack");
  EXPECT_EQ(f[1].value, r0.stack);
  EXPECT_EQ(f[2].message, "rank2.disttest_stack");
  EXPECT_EQ(f[3].kind, Kind::kFailure);
  EXPECT_EQ(f[3].message,
            "[ranks 0, 2 of 3] where they were when disttest took their stacks "
            "(every thread's, merged; outermost call first):\n"
            "ranks 0, 2:\n  main\n  rank 0:\n    wait\n  rank 2:\n    pause\n");
  // One stack alone stays with its rank's failure, and whole in the XML as
  // two or more do.
  auto one = Judge(Spec(3), {r0, r1, Passed(2)});
  ASSERT_THAT(one, SizeIs(2));
  EXPECT_THAT(one[0].message,
              HasSubstr("; it was here:\nTID 1:\n#0  0x1 wait"));
  EXPECT_EQ(one[1].kind, Kind::kProperty);
  EXPECT_EQ(one[1].message, "rank0.disttest_stack");
  EXPECT_EQ(one[1].value, r0.stack);
}

// A stack longer than 64 KiB goes into the XML cut there, and says so.
TEST(JudgeTest, AStackInTheXmlIsCutAt64KiB) {
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.done.reset();
  r0.killed_because = "the test timed out after 300 ms";
  r0.stack = StackAt("wait") + std::string(70 * 1024, 'x');
  auto f = Judge(Spec(2), {r0, Passed(1)});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[1].message, "rank0.disttest_stack");
  EXPECT_EQ(f[1].value, r0.stack.substr(0, 64 * 1024) + "\n... (stack cut)");
}

TEST(JudgeTest, KillsBecauseARankCouldNotStartFollowItsFailure) {
  const auto t0 = std::chrono::steady_clock::now();
  RankReport r0 = Ended(0, RankVerdict::kFailed, kExitFailed);
  r0.done.reset();
  r0.killed_because = "rank 1 could not be started";
  r0.killed_for = RankReport::KilledFor::kPeersStart;
  r0.ended_at = t0;
  RankReport r1;
  r1.rank = 1;
  r1.not_started = "fork failed: Resource temporarily unavailable";
  auto f = Judge(Spec(2), {r0, r1});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message,
            "[rank 1/2] was not started: fork failed: Resource temporarily "
            "unavailable");
  EXPECT_EQ(f[1].message,
            "[rank 0/2] was killed by disttest: rank 1 could not be started");
}

// Whether a failure follows from another rank's is a value the rank or the
// parent set, never read from the words: the same words unmarked are a
// failure of their own, and a rank found stopped is likely the cause.
TEST(JudgeTest, WhatFollowsIsAValueNotTheWords) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string peer_words =
      "barrier failed: rank 1 gave up waiting in the host arena (see its "
      "error)";
  auto f = Judge(Spec(2), {FailedWith(0, peer_words, t0, 1),
                           FailedWith(1, "its own", t0, 50)});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message, "[rank 0/2] (first failure) " + peer_words);
  f = Judge(Spec(2), {FailedWith(0, "said nothing of a peer", t0, 1, true),
                      FailedWith(1, "its own", t0, 50)});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_EQ(f[0].message, "[rank 1/2] (first failure) its own");
  RankReport stopped = Ended(0, RankVerdict::kFailed, kExitFailed);
  stopped.done.reset();
  stopped.killed_because = "still running 2000 ms after rank 1 failed";
  stopped.killed_for = RankReport::KilledFor::kPeersFailure;
  stopped.was_stopped = true;
  stopped.ended_at = t0;
  f = Judge(Spec(2), {stopped, FailedWith(1, "its own", t0, 50)});
  ASSERT_THAT(f, SizeIs(2));
  EXPECT_THAT(f[0].message, HasSubstr("[rank 0/2] (first failure) was "
                                      "killed by disttest: still running"));
}

// A passing rank whose ledger holds one message it sent (`send`) or
// received, on the world of 2, with the balance its ledger keeps of it.
RankReport PassedWithMessage(int rank, bool send, DataType type) {
  RankReport r = Passed(rank);
  RankLedgerView& v = r.ledger.emplace();
  v.rank = rank;
  v.comms = {"world"};
  v.keys = {LedgerKey("world")};
  v.comm_ranks = {rank};
  v.comm_sizes = {2};
  LedgerRecord m;
  m.op = send ? LedgerOp::kSend : LedgerOp::kRecv;
  m.type = type;
  m.count = 8;
  m.peer = 1 - rank;
  m.state = LedgerState::kCompleted;
  m.file = "t.cc";
  m.line = send ? 20 : 30;
  v.records = {m};
  const Ledger::Call call{m.op, type, ReduceOp::kSum, 8, m.peer, 0};
  const std::uint64_t h = send ? MessageHash(rank, 1 - rank, call, 0)
                               : MessageHash(1 - rank, rank, call, 0);
  v.transfers = {{1, send ? h : 0 - h, 0}};
  return r;
}

// Messages not received as they were sent fail a test that passed
// otherwise, first; after another failure they are not judged (a message
// may be unreceived because of it).
TEST(JudgeTest,
     AMessageReceivedAsAnotherTypeFailsOnlyATestThatPassedOtherwise) {
  const RankReport sent = PassedWithMessage(0, true, DataType::kFloat32);
  EXPECT_THAT(
      Judge(Spec(2), {sent, PassedWithMessage(1, false, DataType::kFloat32)}),
      SizeIs(0));
  auto f =
      Judge(Spec(2), {sent, PassedWithMessage(1, false, DataType::kInt32)});
  ASSERT_THAT(f, Not(SizeIs(0)));
  EXPECT_EQ(f[0].kind, Kind::kFatalFailure);
  EXPECT_THAT(f[0].message,
              HasSubstr("the sends and receives on the world communicator did "
                        "not pair, though every one returned:\n  the 1st "
                        "message from rank 0 to rank 1 with tag 0 was sent as "
                        "send(8 x float32 to rank 1, tag 0) at t.cc:20 and "
                        "received as recv(8 x int32 from rank 0, tag 0) at "
                        "t.cc:30"));
  RankReport failed = PassedWithMessage(1, false, DataType::kInt32);
  failed.done = RankVerdict::kFailed;
  failed.outcome = RankOutcome::FromWaitStatus(1 << 8);
  failed.results.push_back(
      {RankMessage::Kind::kFatalFailure, "t.cc", 31, "Expected: 8"});
  for (const Finding& finding : Judge(Spec(2), {sent, failed})) {
    EXPECT_THAT(finding.message, Not(HasSubstr("did not pair")));
  }
}

}  // namespace
}  // namespace disttest::internal
