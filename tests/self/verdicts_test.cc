// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Verdict self-tests, in the way googletest tests itself: run a distributed
// test that must pass, fail, skip, crash or hang in the child binary
// verdicts_child_ (both launch modes, and a child with its own main), then
// check the exit status, the "[rank r/N]" messages at the child's file:line,
// the XML, the time to the verdict, and that nothing was left behind
// (verdicts.h). This file: passing, failing, skipping and crashing ranks,
// the rank's environment, registration, fixtures and expected ends; the
// other verdicts_*_test.cc files hold one concern each.
#include "verdicts.h"

namespace disttest::testing {
namespace {

TEST_P(VerdictsTest, PassingTestPassesAtEverySize) {
  Verdict v = Run("Verdicts.Passes/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (const char* name : {"Passes/1ranks", "Passes/2ranks", "Passes/3ranks"}) {
    std::string tc = TestCaseXml(v.xml, name);
    EXPECT_THAT(tc, HasSubstr("result=\"completed\"")) << name << "\n" << v.xml;
    EXPECT_THAT(tc, Not(HasSubstr("<failure"))) << name;
  }
}

// DISTTEST_LAUNCH sets the launch mode of every test of the run over the
// fixture's (the XML says which ran); any other word is a clear failure.
TEST_P(VerdictsTest, LaunchVariableSetsEveryTestsLaunchMode) {
  const std::string other =
      std::string(GetParam().launch) == "exec" ? "fork" : "exec";
  // Threads, fork or exec; the ranks of a process-only fixture are forked.
  Verdict v = Run("Verdicts.Passes/2ranks", {{"DISTTEST_LAUNCH", other}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(
      TestCaseXml(v.xml, "Passes/2ranks"),
      HasSubstr("<property name=\"disttest_launch\" value=\"" + other + "\"/>"))
      << v.xml;
  v = Run("Verdicts.Passes/2ranks", {{"DISTTEST_LAUNCH", "threads"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(
      TestCaseXml(v.xml, "Passes/2ranks"),
      HasSubstr("<property name=\"disttest_launch\" value=\"threads\"/>"))
      << v.xml;
  v = Run("VerdictsProcessOnly.*", {{"DISTTEST_LAUNCH", "threads"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: VerdictsProcessOnly.OwnsItsRank/"
                        "2ranks runs its ranks as processes, not threads: its "
                        "fixture is options().process_only"));
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1] marker-process-only RANK=1"));
  v = Run("Verdicts.Passes/2ranks", {{"DISTTEST_LAUNCH", "fibers"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("environment variable "
                                   "DISTTEST_LAUNCH='fibers': expected fork, "
                                   "exec, threads or mpiexec"));
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
  // Rank 0 ended as its verdict says, whoever ended its process after (as
  // rank threads, the kill of rank 1 ended it too).
  EXPECT_THAT(v.run.out,
              HasSubstr("rank 0 is past collective #0 barrier() (disttest's, "
                        "before the body); it ended: failed\n"));
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
    EXPECT_THAT(v.run.out, HasSubstr(Out(r) + "marker-arena yes\n"));
  }
  Verdict off = Run("Verdicts.ReportsItsHostArena/3ranks",
                    {{"DISTTEST_NO_HOST_ARENA", "1"}});
  EXPECT_EQ(off.run.exit_code, 0) << off.run.out << off.run.err;
  EXPECT_THAT(off.run.out, HasSubstr(Out(1) + "marker-arena no\n"));
  EXPECT_THAT(off.run.out, Not(HasSubstr("marker-arena yes")));
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

// trial 12: "threw an exception of unknown type" for `throw 42`.
TEST_P(VerdictsTest, AnExceptionOfAnotherKindIsNamedByItsType) {
  Verdict v = Run("Verdicts.ThrowsAnIntAndAStruct/3ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/3] the test body threw int (not "
                                   "a std::exception)"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 2/3] the test body threw (anonymous "
                        "namespace)::NotAStdException (not a std::exception)"))
      << v.run.out;
}

TEST_P(VerdictsTest, ExitInTheBodyIsReportedWithItsStatus) {
  Verdict v = Run("Verdicts.CallsExit3/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  if (Threads()) {
    // With its own status: the process ends there, without destroying
    // statics under rank 0's thread (a crash in one was the end CI saw).
    EXPECT_THAT(v.run.out, ::testing::ContainsRegex(
                               "\\[rank 1/2\\] (\\(first failure\\) )?rank "
                               "1's thread called exit\\(\\) \\(exited with "
                               "status 3\\)"))
        << v.run.out;
    EXPECT_THAT(v.run.out,
                Not(::testing::ContainsRegex("SEGV|killed by signal")));
    return;
  }
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] exited with status 3 before "
                                   "the test body finished"));
}

TEST_P(VerdictsTest, SignalIsReportedByName) {
  SKIP_FOR_THREADS(
      "a signal ends the process of every rank thread (SignalRank is refused)");
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

TEST_P(VerdictsTest, InvalidWorldSizeIsAClearFailure) {
  Verdict v = Run("Verdicts.InvalidWorldSize/invalid_world_size_0");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("world size 0 is invalid: DIST_TEST_F "
                                   "world sizes must be between 1 and 1024"));
}

// EXPECT_DEATH in a rank, in gtest's "fast" style and in the "threadsafe"
// one its warning recommends (the binary re-executed: the child runs the
// body as the rank that started it, not a distributed test of its own).
TEST_P(VerdictsTest, DeathTestsWorkInARankInBothStyles) {
  SKIP_FOR_THREADS(
      "a death test forks or re-executes the process of every rank thread");
  for (const char* style : {"fast", "threadsafe"}) {
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
  SKIP_FOR_THREADS("a rank thread has no environment of its own");
  Verdict v = Run("Verdicts.ChildEnvironment/2ranks",
                  {{"GTEST_TOTAL_SHARDS", "1"},
                   {"GTEST_SHARD_INDEX", "0"},
                   {"NCCL_DEBUG", "INFO"},
                   {"XML_OUTPUT_FILE", "/nonexistent/x.xml"},
                   {"TEST_PREMATURE_EXIT_FILE", TempPath(".premature")}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
}

TEST_P(VerdictsTest, GtestOutputVariableDoesNotReachTheRanks) {
  SKIP_FOR_THREADS(
      "the case reads RANK, which a rank thread has not (its process has no "
      "rank environment of its own)");
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
  EXPECT_THAT(v.run.out, HasSubstr(Out(0) + "marker-body rank 0"));
  EXPECT_THAT(v.run.out, Not(HasSubstr(Out(1) + "marker-body rank 1")));
  EXPECT_THAT(v.run.out, HasSubstr(Out(1) + "marker-teardown rank 1"));
}

TEST_P(VerdictsTest, CommWithoutInitDistributedSaysWhy) {
  Verdict v = Run("VerdictsNoComm.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("comm() is not available: "
                                   "options().init_distributed is false"));
  EXPECT_THAT(TestCaseXml(v.xml, "RunsWithoutCommunicator/3ranks"),
              Not(HasSubstr("<failure")));
}

// Code under test finds its rank without the environment or the fixture:
// disttest::CurrentRank() is the fixture's rank in every part of the rank's
// test, from its threads too, in every launch mode and in a pooled rank's
// next test; outside a rank it throws saying where it may be called.
TEST_P(VerdictsTest, CurrentRankIsTheRankThroughoutItsTest) {
  Verdict v = Run("VerdictsCurrentRank*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                               "{}marker-current-rank {} of 3", Out(r), r)));
  }
  EXPECT_THAT(v.run.out, HasSubstr(Out(0) + "marker-current-rank 0 of 1"));
  EXPECT_THAT(v.run.out, HasSubstr(Out(1) + "marker-pooled-current-rank 1"));
  EXPECT_THAT(v.run.out,
              HasSubstr("marker-outside disttest::CurrentRank() was called "
                        "outside a rank's test: it is set in a distributed "
                        "test's SetUpRank(), body and TearDownRank()"));
}

TEST_P(VerdictsTest, TestWithoutCommunicatorBuildsItsOwnFromTheStore) {
  Verdict v = Run("VerdictsNoComm.BuildsItsOwnCommunicator/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out,
                HasSubstr(Out(r) + "marker-own-communicator 6 gloo\n"));
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

// Sizes that split no world at all are a mistake of the test: it fails at
// every world size, naming them, instead of skipping them all (exit 0).
TEST_P(VerdictsTest, ParallelLayoutThatFitsNoWorldFailsTheTest) {
  for (const char* bad : {"tensor0", "zero1"}) {
    Verdict v =
        Run("VerdictsParallel.*", {{"VERDICTS_PARALLEL_SPLITS_NONE", bad}});
    EXPECT_NE(v.run.exit_code, 0) << v.run.out << v.run.err;
    for (const char* world : {"2ranks", "3ranks"}) {
      EXPECT_THAT(TestCaseXml(v.xml, std::string("TensorGroupsOfTwo/") + world),
                  HasSubstr("<failure"))
          << bad << " " << world << "\n"
          << v.xml;
    }
    EXPECT_THAT(v.run.out,
                HasSubstr(std::string_view(bad) == "tensor0"
                              ? "options().parallel splits no world: parallel "
                                "sizes must be >= 1: tensor 0, pipeline 1, "
                                "data 0"
                              : "options().parallel splits no world: "
                                "parallel.zero1 = 3 does not divide the data "
                                "size 2"))
        << v.run.out;
    EXPECT_THAT(v.run.out, Not(HasSubstr("[  SKIPPED ]"))) << v.run.out;
  }
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
  const std::string& path() const { return path_; }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
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
  // A test with DistributedFixtures runs as processes in every mode.
  EXPECT_THAT(v.run.out, HasSubstr("[rank 0] marker-body-after-fixtures 0\n"));
  for (const char* name :
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

// A rank the test expects to die (ExpectRankToEnd) is killed by a peer
// (SignalRank); its survivors see it gone, in the arena and over Gloo alike,
// and the test passes saying how the rank ended.
TEST_P(VerdictsTest, ExpectedKillOfARankPasses) {
  SKIP_FOR_THREADS(
      "a thread cannot end alone (ExpectRankToEnd is refused: "
      "RankControlMisuseIsNamed)");
  for (const char* arena : {"0", "1"}) {
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
    EXPECT_THAT(v.run.out, Not(HasSubstr(Out(2) + "marker-survivor")));
    EXPECT_THAT(TestCaseXml(v.xml, "SurvivorsOfAnExpectedKill/4ranks"),
                Not(HasSubstr("<failure")));
  }
}

TEST_P(VerdictsTest, ExpectedExitOfARankPasses) {
  SKIP_FOR_THREADS(
      "a thread cannot end alone (ExpectRankToEnd is refused: "
      "RankControlMisuseIsNamed)");
  Verdict v = Run("Verdicts.ExpectedExitOfARank/2ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: [rank 1/2] exited with status 3, "
                        "as the test expected (ExpectRankToEnd)"));
  EXPECT_THAT(v.run.out,
              HasSubstr("marker-two-ends: ExpectRankToEnd(1, ...) in rank 1: "
                        "this rank declared before that rank 1 will exit with "
                        "status 3; it cannot also exit with status 4 (a rank "
                        "ends one way)"))
      << v.run.out;
}

TEST_P(VerdictsTest, ExpectedEndThatDoesNotComeFails) {
  SKIP_FOR_THREADS(
      "a thread cannot end alone (ExpectRankToEnd is refused: "
      "RankControlMisuseIsNamed)");
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
  SKIP_FOR_THREADS(
      "a thread cannot end alone (ExpectRankToEnd is refused: "
      "RankControlMisuseIsNamed)");
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
  if (Threads()) {
    // Refused, saying why, whatever the arguments.
    EXPECT_THAT(v.run.out,
                HasSubstr("marker-misuse 2: ExpectRankToEnd() needs ranks "
                          "that are processes: this test's ranks are threads "
                          "of one process (LaunchMode::kThreads), and a "
                          "thread cannot end or take a signal alone; mark "
                          "the fixture options().process_only = true"));
    EXPECT_THAT(v.run.out, HasSubstr("marker-misuse 1: SignalRank() needs "
                                     "ranks that are processes"));
    return;
  }
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
    ::testing::Values(
        ChildSetup{"fork", DISTTEST_VERDICTS_CHILD, "fork", ""},
        ChildSetup{"exec", DISTTEST_VERDICTS_CHILD, "exec", ""},
        ChildSetup{"threads", DISTTEST_VERDICTS_CHILD, "threads", ""},
        ChildSetup{"OwnMainFork", DISTTEST_VERDICTS_OWN_MAIN_CHILD, "fork",
                   "--user_flag=42"},
        ChildSetup{"OwnMainExec", DISTTEST_VERDICTS_OWN_MAIN_CHILD, "exec",
                   "--user_flag=42"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace disttest::testing
