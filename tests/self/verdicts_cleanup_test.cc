// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What a rank inherits and what it leaves: processes and daemons it started,
// descriptors and connections, resource limits, /dev/shm, a store of its
// own, and a whole run that leaves nothing behind (verdicts.h).
#include <poll.h>
#include <signal.h>

#include "verdicts.h"

namespace disttest::testing {
namespace {

// The disttest-keeper of the session `session` (the test process runs in
// one of its own: setsid), or -1.
pid_t KeeperOfSession(pid_t session) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string stat = ReadFile(entry.path().string() + "/stat");
    const std::size_t close = stat.rfind(')');
    if (stat.find("(disttest-keeper)") == std::string::npos ||
        close == std::string::npos) {
      continue;
    }
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    long parent = 0, group = 0, its_session = 0;
    fields >> state >> parent >> group >> its_session;
    if (its_session == session && state != "Z") {
      return static_cast<pid_t>(std::stol(entry.path().filename().string()));
    }
  }
  return -1;
}

// Runs 8 ranks, rank 1 of which starts a daemon and a child, in a session
// of their own, and SIGKILLs the test process mid-test (after its keeper,
// with `keeper_first`, once another has taken its place); nothing may be
// left, and the keeper says what it ended.
void KillMidTestAndCheckNothingIsLeft(const ChildSetup& setup, bool threads,
                                      bool keeper_first) {
  bool sent = false;
  std::vector<std::string> args = {
      "/usr/bin/setsid", setup.binary,
      "--gtest_filter=Verdicts.HangsForSignalTestsWithADaemon/8ranks"};
  if (*setup.extra_arg != '\0') args.push_back(setup.extra_arg);
  ChildRun run = RunChild(
      args, {{"VERDICTS_LAUNCH", setup.launch}}, std::chrono::seconds(60),
      [&](pid_t pid, const std::string& out, const std::string&) {
        if (sent || Occurrences(out, "marker-running rank ") != 8) return;
        sent = true;
        if (keeper_first) {
          const pid_t first = KeeperOfSession(pid);
          ASSERT_GT(first, 0) << "no keeper in session " << pid;
          kill(first, SIGKILL);
          // Until the test process has started another.
          const auto deadline =
              std::chrono::steady_clock::now() + std::chrono::seconds(30);
          pid_t next = KeeperOfSession(pid);
          while ((next <= 0 || next == first) &&
                 std::chrono::steady_clock::now() < deadline) {
            poll(nullptr, 0, 10);
            next = KeeperOfSession(pid);
          }
          EXPECT_GT(next, 0) << "no keeper took the place of " << first;
          EXPECT_NE(next, first);
        }
        kill(pid, SIGKILL);
      });
  EXPECT_EQ(run.signal, SIGKILL) << run.out << run.err;
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
  EXPECT_THAT(ShmLeftovers(run.pid), ::testing::IsEmpty());
  EXPECT_THAT(
      run.err,
      ::testing::ContainsRegex(
          "\\[ disttest \\] the test process " + std::to_string(run.pid) +
          " ended while its ranks ran \\(it was killed, crashed, or exited "
          "without ending them\\); its keeper ended " +
          (threads ? "1 process of its ranks \\([0-9]+\\)"
                   : "8 processes of its ranks \\(([0-9]+, ){7}[0-9]+\\)") +
          " and 2 processes they had started: [0-9]+ \\(sleep\\), "
          "[0-9]+ \\(sleep\\)\n"))
      << run.err;
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
  EXPECT_THAT(v.run.out, KilledBySigkill(1, 2));
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
                  (Threads() ? std::string("\\[rank threads\\]")
                             : std::string("\\[rank 1\\]")) +
                  " disttest: note: ended process [0-9]+ "
                  "\\(sleep 1000\\), which the test started and left "
                  "running\n"));
}

// A rank the harness cannot ask (it was killed) leaves its daemon to the
// parent, which ends it.
TEST_P(VerdictsTest, DaemonOfAKilledRankEndsWithTheTest) {
  Verdict v = Run("Verdicts.StartsADaemonAndIsKilled/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, KilledBySigkill(1, 2));
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
  for (const char* test : {"Verdicts.StartsABareDaemonAndIsKilled/2ranks",
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

// A rank holds none of the descriptors the parent keeps for its siblings
// (their output pipes and pidfds): the last of 8 holds no more than the
// first.
TEST_P(VerdictsTest, RanksHoldNoneOfTheirSiblingsDescriptors) {
  SKIP_FOR_THREADS("rank threads share one process and its descriptors");
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
  // launch_from_env() reads the rank environment, which rank threads have
  // not (its error says what to set).
  Verdict v = Run(Threads() ? "Verdicts.CodeServesItsOwnStoreOnMasterPort/*"
                            : "Verdicts.CodeServesItsOwnStoreOnMasterPort/*:"
                              "Verdicts.LaunchFromEnvInsideATest/*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("{}marker-own-store {}", Out(r), r)));
  }
  for (int r = 0; r < 2 && !Threads(); ++r) {
    EXPECT_THAT(v.run.out, HasSubstr(fmt::format(
                               "[rank {}] marker-launch-from-env {}", r, r)));
  }
}

// A crash after a rank's verdict is no pass: a rank thread whose
// thread_local crashes as its thread ends (after its verdict went) fails
// the test, named with its signal. Process ranks _exit: no thread_local is
// destroyed, and the test passes.
TEST_P(VerdictsTest, CrashAfterTheVerdictFailsTheTest) {
  Verdict v = Run("Verdicts.CrashesAfterItsVerdict/2ranks");
  if (!Threads()) {
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    return;
  }
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  // Killed by the signal; under ASan, whose handler ends a crash with an
  // exit, "rank 1's thread crashed (SIGSEGV), and the process ... exited".
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex("\\[rank 1/2\\] [^\n]*SIGSEGV"));
  // Rank 0 passed and is judged so (under ASan its report is in the one
  // output the threads share, which is labelled rank 0's).
  if (v.run.out.find("AddressSanitizer") == std::string::npos) {
    EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/2]")));
  }
}

// Nor is a hang after the verdicts: where ranks are threads, a process
// that every rank had reported from but that does not end (a thread_local
// that hangs as its thread ends) fails at the test's deadline, saying so.
TEST_P(VerdictsTest, HangAfterTheVerdictsFailsTheTest) {
  SKIP_FOR_THREADS_ONLY();
  Verdict v = Run("VerdictsShortTimeout.HangsAfterItsVerdict/2ranks");
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("every rank had reported its verdict, but the process "
                        "of the rank threads did not end, and disttest ended "
                        "it at the test's deadline"))
      << v.run.out;
}

// What the ranks started goes too when the test process is killed with
// SIGKILL, though no code of that process can end it: its ranks stop (not
// die) with it, so that a daemon stays their descendant, and its keeper
// ends them all and says so. KillOrphans() fails for anything left (this
// process is a subreaper: it would have come here). The test process runs
// in a session of its own (setsid), as under ctest its ranks' new parent
// is outside it: the kernel then sends the stopped group SIGHUP and
// SIGCONT, which ended one of 8 ranks, its daemon left to init.
TEST_P(VerdictsTest, ParentKilledMidTestTakesWhatItsRanksStarted) {
  KillMidTestAndCheckNothingIsLeft(GetParam(), Threads(),
                                   /*keeper_first=*/false);
}

// The keeper killed on its own first: the test process starts another
// (trial 14: the ranks stayed stopped once the test process was killed).
TEST_P(VerdictsTest, ParentKilledAfterItsKeeperTakesWhatItsRanksStarted) {
  KillMidTestAndCheckNothingIsLeft(GetParam(), Threads(),
                                   /*keeper_first=*/true);
}

TEST_P(VerdictsTest, FullRunLeavesNothingBehind) {
  // The own-main binary's ranks are forked and re-executed as the other
  // binary's are (each case runs under it alone): a whole run of it adds
  // 35 s of CI and nothing the fork and exec runs do not check.
  if (*GetParam().extra_arg != '\0') {
    GTEST_SKIP() << "a whole run is checked with fork, exec and threads; "
                    "under a main() of its own each case runs alone";
  }
  SKIP_FOR_THREADS_UNDER_TSAN(
      "the counts are those of a run without it (exit() and crashes end "
      "with its status, 66); each case runs alone");
  // Every case at once, failures, crashes and hangs included; Run() checks
  // for leftover queues and processes.
  // One GPU: the NCCL test skips on any machine.
  // (Not the 32- and 128-rank hangs: their stacks take seconds.)
  // About 50 s on two cores, and over 120 s under ASan: the child's
  // deadline scales with the build, inside ctest's 300 s for the test.
  const auto deadline = std::chrono::seconds(static_cast<long long>(
      std::min(120 * std::max(1.0, SlowBuildScale()), 280.0)));
  // Not, as threads, the two death tests: gtest's death tests are not
  // thread-safe (each rank thread forks its process at once), and need
  // options().process_only.
  Verdict v = RunVerdicts(
      GetParam(),
      std::string("*-Verdicts.HangsForSignalTests*:Close/*:"
                  "VerdictsShortTimeout.AllHangInTwoPlaces/32ranks:"
                  "VerdictsShortTimeout.AllHangInTwoPlaces/128ranks") +
          (Threads() ? ":Verdicts.DeathTest*" : ""),
      {{"DISTTEST_GPUS", "1"}}, deadline);
  EXPECT_EQ(v.run.exit_code, 1);
  // As threads, four cases that read the rank environment or expect a
  // rank to end alone fail, saying so, and so do a crash and a hang after
  // a rank's verdict (a process rank's _exit destroys no thread_local).
  EXPECT_THAT(v.run.out, HasSubstr(Threads() ? "[  PASSED  ] 76 tests."
                                             : "[  PASSED  ] 83 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  SKIPPED ] 6 tests"));
  EXPECT_THAT(v.run.out,
              HasSubstr(Threads() ? "73 FAILED TESTS" : "68 FAILED TESTS"));
}

}  // namespace
}  // namespace disttest::testing
