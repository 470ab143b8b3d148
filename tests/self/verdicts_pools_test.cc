// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks (options().reuse_workers) and exec ranks forked by the zygote
// (verdicts.h).
#include "verdicts.h"

namespace disttest::testing {

// "[rank 0] marker-pool First pid 123 count 1" -> {pid, count}, per test.
std::map<std::string, std::pair<int, int>> PoolLines(const std::string& out,
                                                     int rank) {
  std::map<std::string, std::pair<int, int>> found;
  std::istringstream in(out);
  const std::string prefix = "[rank " + std::to_string(rank) + "] marker-pool ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    std::string test, pid_word, count_word;
    int pid = 0, count = 0;
    fields >> test >> pid_word >> pid >> count_word >> count;
    found[test] = {pid, count};
  }
  return found;
}

namespace {

TEST_P(VerdictsTest, DaemonStartedByAPooledRankEndsWithItsTest) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v = Run("VerdictsPooledDaemon.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.err, ::testing::ContainsRegex(
                             "\\[rank 1\\] disttest: note: ended process "
                             "[0-9]+ \\(sleep 1000\\)"));
  // Ended with its test, not when the pool ends: the next test on the same
  // rank finds no child left.
  EXPECT_THAT(v.run.out, HasSubstr(Out(1) + "marker-no-children\n"));
  auto tests = PoolLines(v.run.out, 1);
  ASSERT_EQ(tests.size(), 3u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["AfterTheDaemon"].first, tests["StartsADaemon"].first);
  }
}

TEST_P(VerdictsTest, PooledRanksRunTheNextTestUntilOneFails) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v = Run("VerdictsPooled.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-pool-failure", "[rank 1/2]")));
  for (int r = 0; r < 2; ++r) {
    auto tests = PoolLines(v.run.out, r);
    ASSERT_EQ(tests.size(), 8u) << v.run.out;
    if (std::string(GetParam().launch) == "exec") {
      // kExec ranks are started for each test.
      for (const auto& [test, process] : tests) {
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

// gtest runs a filter's tests in the order registered: a test that failed
// after a shuffled order on reused ranks comes back with the whole run, not
// with a filter (the line gave a filter that passed: trial 7).
TEST_P(VerdictsTest, PooledRerunOfAShuffleIsTheWholeRun) {
  if (std::string(GetParam().launch) != "fork") {
    GTEST_SKIP() << "reused ranks are forked";
  }
  std::string user_args =
      *GetParam().extra_arg ? " " + std::string(GetParam().extra_arg) : "";
  // The second test to run fails, in either order.
  Verdict v = Run("VerdictsPooledShuffle.*",
                  {{"GTEST_SHUFFLE", "1"}, {"GTEST_RANDOM_SEED", "2"}});
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("marker-after-first-in-this-process"))
      << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("they ran in a shuffled order, which no "
                        "--gtest_filter gives; run it all again with the "
                        "seed of the run's first shuffle: GTEST_SHUFFLE=1 " +
                        std::string(GetParam().binary)))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr(user_args + " --gtest_random_seed=2\n"))
      << v.run.out;
}

// A suite's SetUpTestSuite() runs in the parent before its first test: its
// tests' pooled ranks are forked after it. Reused from the suite before
// (same world size and options), they lacked it, and a test that checks what
// it set up passed only there (trial 10); reused from the suite's own last
// run (--gtest_repeat), they had the first run's.
TEST_P(VerdictsTest, PooledRanksOfASuiteComeAfterItsSetUpTestSuite) {
  Verdict v = Run("VerdictsPooledSuite*", {{"GTEST_REPEAT", "2"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-suite-set-up-unseen")))
      << v.run.out;
  // A re-executed rank runs the suite's set-up itself, first in its process.
  const bool exec = std::string(GetParam().launch) == "exec";
  for (int r = 0; r < 2; ++r) {
    for (const char* value : {"1", exec ? "1" : "2"}) {
      EXPECT_THAT(v.run.out,
                  HasSubstr(Out(r) + "marker-suite-value " + value + "\n"))
          << v.run.out;
    }
  }
}

// The pool's fast path (ranks and communicator reused, the communicator
// parked between tests) checks what a fresh test's ranks check: ranks that
// disagree about a collective all fail, through the arena and through Gloo.
TEST_P(VerdictsTest, PooledRanksThatDisagreeFail) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  const std::string calls =
      "does not match across the 2 ranks: rank 0: allreduce(8 x float32, "
      "sum); rank 1: broadcast(8 x float32, root 0)";
  for (const char* no_arena : {"0", "1"}) {
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
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
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
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v =
      Run("VerdictsPooled.AfterTheKill/*:VerdictsPooled.SkipsOnRank1/"
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
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v =
      Run("VerdictsPooledAndADeathTest.*", {{"VERDICTS_DEATH_TEST", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  if (std::string(GetParam().launch) == "fork") {
    EXPECT_EQ(tests["AfterTheDeathTest"],
              std::make_pair(tests["BeforeTheDeathTest"].first, 2));
  }
}

TEST_P(VerdictsTest, CaughtCommunicatorFailureEndsThePool) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v = Run("VerdictsPooledShort.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  auto tests = PoolLines(v.run.out, 0);
  ASSERT_EQ(tests.size(), 2u) << v.run.out;
  EXPECT_EQ(tests["AfterTheCaughtFailure"].second, 1);
  EXPECT_NE(tests["AfterTheCaughtFailure"].first,
            tests["CatchesAFailedRecv"].first);
}

TEST_P(VerdictsTest, NoReuseStartsRanksForEveryTest) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
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
  SKIP_FOR_THREADS("their process is forked, not started through the zygote");
  if (std::string(GetParam().launch) != "exec") GTEST_SKIP() << "kExec only";
  const std::string filter =
      "Verdicts.ShowsWhereItCameFrom/2ranks:"
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
  SKIP_FOR_THREADS("their process is forked, not started through the zygote");
  if (std::string(GetParam().launch) != "exec") GTEST_SKIP() << "kExec only";
  Verdict v =
      Run("Verdicts.Passes/2ranks:Verdicts.KillsTheZygote/1ranks:"
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
  SKIP_FOR_THREADS("their process is forked, not started through the zygote");
  if (std::string(GetParam().launch) != "exec") GTEST_SKIP() << "kExec only";
  Verdict v = Run("VerdictsElsewhere.ShowsWhereItCameFrom/2ranks",
                  {{"DISTTEST_INTERNAL_ZYGOTE_DIE_BEFORE_ANSWER", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: the kExec zygote failed (it "
                        "ended); ranks are exec'd one by one from now on\n"));
  for (const char* rank :
       {"marker-elsewhere rank 0 ", "marker-elsewhere rank 1 "}) {
    EXPECT_EQ(Count(v.run.out, rank), 1) << rank << "\n" << v.run.out;
  }
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 1 test."));
}

}  // namespace
}  // namespace disttest::testing
