// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Runs under a launcher: the child binary launched_child_ started once per
// rank by mpirun (Open MPI), or by local-launcher.sh with torchrun's or
// srun's environment; checks the one report rank 0 gives (output, XML,
// exit status), that a dead or hung rank ends the run promptly, that ranks
// at different tests fail loudly, and that no process is left.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "disttest/comm/create.h"
#include "self/child_process.h"
#include "support/loopback_socket.h"

namespace disttest::testing {
namespace {

using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

int LineOf(const std::string& marker) {
  return LineIn(DISTTEST_LAUNCHED_CHILD_SOURCE, marker);
}

struct Launcher {
  const char* name;  // "torchrun", "slurm", "mpirun"
};

void PrintTo(const Launcher& l, std::ostream* os) { *os << l.name; }

struct Report {
  ChildRun run;
  std::string xml;
  std::string all;  // stdout + stderr
};

class LaunchedTest : public ::testing::TestWithParam<Launcher> {
 protected:
  void SetUp() override {
    if (std::string(GetParam().name) == "mpirun") {
      for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
        std::string path = std::string(dir) + "/mpirun";
        if (access(path.c_str(), X_OK) == 0) mpirun_ = path;
      }
      if (mpirun_.empty()) {
        GTEST_SKIP() << "mpirun is not installed (Debian: openmpi-bin)";
      }
    }
  }

  std::string mpirun_;

  Report Launch(const std::string& filter,
                std::vector<std::pair<std::string, std::string>> env = {},
                const OutputWatch& watch = nullptr) {
    const std::string xml_path = TempPath(".xml");
    std::vector<std::string> child = {
        DISTTEST_LAUNCHED_CHILD, "--gtest_filter=" + filter, "--gtest_color=no",
        "--gtest_output=xml:" + xml_path};
    std::vector<std::string> args;
    const std::string name = GetParam().name;
    if (name == "mpirun") {
      args = {mpirun_, "--oversubscribe", "-np", "4"};
      if (getuid() == 0) args.push_back("--allow-run-as-root");
      for (const char* x : {"-x", "MASTER_ADDR=127.0.0.1", "-x"}) {
        args.push_back(x);
      }
      args.push_back("MASTER_PORT=" + std::to_string(FreePort()));
      for (auto& [k, v] : env) {
        args.push_back("-x");
        args.push_back(k + "=" + v);
      }
    } else {
      args = {DISTTEST_LOCAL_LAUNCHER, name, "4"};
      env.push_back(LauncherPort(name));
    }
    args.insert(args.end(), child.begin(), child.end());
    Report r;
    r.run = RunChild(args, env, std::chrono::seconds(120), watch);
    r.xml = ReadFile(xml_path);
    r.all = r.run.out + r.run.err;
    std::filesystem::remove(xml_path);
    EXPECT_FALSE(r.run.timed_out) << r.all;
    EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
    return r;
  }
};

TEST_P(LaunchedTest, RankZeroReportsEveryRanksResultsOnce) {
  Report r = Launch(
      "Launched.Passes/*:Launched.FailsOnRank1/*:Launched.SkipsEverywhere/"
      "*:Launched.NeedsEight/*:LaunchedWithFixture.*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;  // A test failed: every rank says so.
  // The failure of rank 1, at its line, once: only rank 0 reports.
  const std::string failure =
      "launched_child_.cc:" + std::to_string(LineOf("marker-external-fail")) +
      ": Failure\n[rank 1/4] ";
  EXPECT_EQ(Occurrences(r.run.out, failure), 1u) << r.all;
  EXPECT_EQ(Occurrences(r.run.out, "[==========] Running"), 1u) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("needs 8 ranks, launched with 4"));
  EXPECT_THAT(r.run.out,
              HasSubstr("all 4 ranks skipped: marker-external-skip"));
  // A 2-rank test runs on ranks 0 and 1 of the 4.
  EXPECT_THAT(r.run.err, HasSubstr("marker-body rank 1 of 2\n"));
  EXPECT_THAT(r.run.err, Not(HasSubstr("marker-body rank 2 of 2")));
  EXPECT_THAT(r.run.err, HasSubstr("marker-body rank 3 of 4\n"));
  // Ranks other than 0 print nothing on stdout.
  EXPECT_EQ(Occurrences(r.run.out, "Running main() from"), 1u) << r.run.out;
  for (const char* name : {"Passes/1ranks", "Passes/2ranks", "Passes/4ranks",
                           "ReadsTheShards/4ranks"}) {
    EXPECT_THAT(TestCaseXml(r.xml, name), HasSubstr("result=\"completed\""))
        << name << "\n"
        << r.xml;
    EXPECT_THAT(TestCaseXml(r.xml, name), Not(HasSubstr("<failure")));
  }
  EXPECT_THAT(TestCaseXml(r.xml, "FailsOnRank1/4ranks"),
              HasSubstr("[rank 1/4]"));
  EXPECT_THAT(TestCaseXml(r.xml, "NeedsEight/8ranks"),
              HasSubstr("result=\"skipped\""));
  EXPECT_THAT(TestCaseXml(r.xml, "SkipsEverywhere/4ranks"),
              HasSubstr("result=\"skipped\""));
}

// A launcher that gives two processes one RANK: one of them answered for
// rank 1 and rank 0 reported a pass (trial 11). The second to join now ends
// saying so, and rank 0 fails every test with its words.
TEST_P(LaunchedTest, TwoProcessesWithOneRankFailTheRun) {
  if (std::string(GetParam().name) != "torchrun") {
    GTEST_SKIP() << "the local launcher makes the duplicate (torchrun's)";
  }
  Report r = Launch("Launched.Passes/*", {{"DUPLICATE_RANK", "1"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  const std::string why = "two processes joined the job as rank 1 of 4";
  // (The other's host is named when it joined before this one asked.)
  EXPECT_THAT(r.all, HasSubstr("ends here; the other")) << r.all;
  for (const char* name : {"Passes/1ranks", "Passes/2ranks", "Passes/4ranks"}) {
    EXPECT_THAT(TestCaseXml(r.xml, name), HasSubstr(why)) << name << "\n"
                                                          << r.xml;
  }
  EXPECT_THAT(r.run.out, Not(HasSubstr("PASSED  ] 3 tests"))) << r.all;
}

// Rank 0 writes the store's token file before it serves; a store it cannot
// host (an address of no interface here: bind() fails, nothing is sent)
// left the file behind (trial 11).
TEST(LaunchedRankZeroTest, AStoreThatCannotBeHostedLeavesNoTokenFile) {
  const std::string token = TempPath(".token");
  ChildRun run = RunChild(
      {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=Launched.Passes/2ranks"},
      {{"RANK", "0"},
       {"WORLD_SIZE", "2"},
       {"LOCAL_WORLD_SIZE", "1"},
       {"MASTER_ADDR", "198.18.0.77"},
       {"MASTER_PORT", std::to_string(FreePort())},
       {"DISTTEST_TOKEN_FILE", token},
       // Bounded where the address can be bound after all
       // (ip_nonlocal_bind): rank 1 never comes.
       {"DISTTEST_TIMEOUT", "10"}},
      std::chrono::seconds(60));
  EXPECT_NE(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out + run.err, HasSubstr("cannot host the store on "
                                           "198.18.0.77"))
      << run.out << run.err;
  EXPECT_FALSE(std::filesystem::exists(token)) << token;
  std::filesystem::remove(token);
}

// A test whose ranks need a GPU each, launched on a machine without one,
// fails saying so, before NCCL is asked (trial 11: "cudaSetDevice(0)
// failed: CUDA driver version is insufficient"). Not a skip: every rank
// would have to skip alike, and nodes may differ.
TEST_P(LaunchedTest, AGpuTestOnANodeWithoutAGpuFailsSayingSo) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  Report r = Launch("LaunchedNccl.*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("backend nccl needs a GPU a rank, and this "
                                   "process sees none on "))
      << r.all;
  EXPECT_THAT(r.all, Not(HasSubstr("cudaSetDevice"))) << r.all;
  EXPECT_THAT(r.all, Not(HasSubstr("marker-nccl-ran-without-a-gpu")));
}

// The communicator a launched process keeps from test to test starts
// each with the test's timeout (review: an earlier test's set_timeout()
// stayed).
TEST_P(LaunchedTest, EachTestStartsWithItsOwnTimeout) {
  Report r =
      Launch("Launched.SetsATimeout/*:Launched.StartsWithItsOwnTimeout/*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.all, Not(HasSubstr("marker-launched-timeout"))) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 2 tests.")) << r.all;
}

TEST_P(LaunchedTest, PassingRunExitsZeroEverywhere) {
  Report r = Launch("Launched.Passes/*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 3 tests."));
  // What each rank recorded is in rank 0's XML, per rank.
  const std::string tc = TestCaseXml(r.xml, "Passes/4ranks");
  for (int q = 0; q < 4; ++q) {
    EXPECT_THAT(tc, HasSubstr("<property name=\"rank" + std::to_string(q) +
                              ".marker-property\" value=\"" +
                              std::to_string(q) + "\"/>"))
        << tc;
  }
}

TEST_P(LaunchedTest, OtherRanksWriteTheirOwnLogsWhenAsked) {
  const std::string dir = TempPath("-logs");
  Report r = Launch("Launched.Passes/4ranks", {{"DISTTEST_LOG_DIR", dir}});
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  // Rank 0 reports on the console; rank 3 keeps its own view in its log.
  EXPECT_THAT(r.run.out, HasSubstr("[       OK ] Launched.Passes/4ranks"));
  std::string log = ReadFile(dir + "/rank-3.log");
  EXPECT_THAT(log, HasSubstr("[       OK ] Launched.Passes/4ranks")) << log;
  EXPECT_THAT(log, HasSubstr("marker-body rank 3 of 4\n"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank-0.log"));
  std::filesystem::remove_all(dir);
}

// A failure of a rank other than 0 outside its body (in the fixture's
// constructor, SetUp(), TearDown() or destructor, which gtest runs in every
// launched process) fails the test in rank 0's report, labelled with the
// rank; a fatal one or a skip in SetUp(), after which gtest runs no body on
// that rank, too, at once, and the run goes on.
TEST_P(LaunchedTest, AFailureOutsideTheBodyOfAnyRankFailsTheTest) {
  for (const char* where : {"constructor", "SetUp", "SetUp-fatal", "SetUp-skip",
                            "TearDown", "destructor"}) {
    SCOPED_TRACE(where);
    Report r = Launch("LaunchedFixtureFails.Body/*:LaunchedAfterTheFixture.*",
                      {{"LAUNCHED_FAILS_IN", where}});
    EXPECT_NE(r.run.exit_code, 0) << r.all;
    if (std::string(where) == "SetUp-skip") {
      EXPECT_THAT(r.run.out, HasSubstr("rank 2 of 4 skipped (\"marker-SetUp-"
                                       "skip on rank 2\") while the other "
                                       "ranks ran"))
          << r.all;
    } else {
      EXPECT_THAT(r.run.out,
                  ::testing::ContainsRegex(
                      std::string("\\[rank 2/4\\] (\\(first failure\\) )?"
                                  "Failed\nmarker-") +
                      where + " on rank 2"))
          << r.all;
    }
    EXPECT_THAT(r.run.out,
                HasSubstr("[  FAILED  ] LaunchedFixtureFails.Body/4ranks"))
        << r.all;
    if (std::string(where).rfind("SetUp-", 0) == 0) {
      // Rank 2 left before its body, while the others waited for it in a
      // collective: cut after the failure grace, as any rank that leaves
      // so (ARankThatLeftFailingCutsTheOthersAfterTheGrace).
      EXPECT_THAT(r.run.out,
                  HasSubstr("not run: the launched ranks stopped working "
                            "together in an earlier test"))
          << r.all;
    } else {
      EXPECT_THAT(r.run.out,
                  HasSubstr("[       OK ] LaunchedAfterTheFixture.Next/4ranks"))
          << r.all;
    }
    EXPECT_THAT(TestCaseXml(r.xml, "Body/4ranks"),
                HasSubstr(std::string("marker-") + where))
        << r.xml;
    EXPECT_THAT(r.all, Not(HasSubstr("did not arrive"))) << r.all;
  }
}

// The same on a rank past the test's world size (a 2-rank test of 4
// launched), after which gtest runs no body there; and a test run again
// (--gtest_repeat), which meets at each repeat; and --gtest_fail_fast, which
// every rank follows alike (each mirrors rank 0's failure for what came
// outside a body).
TEST_P(LaunchedTest, AFailureOutsideTheBodyIsSaidInEveryCase) {
  Report outside = Launch(
      "LaunchedFixtureFails.BodyOfTwo/*",
      {{"LAUNCHED_FAILS_IN", "SetUp-fatal"}, {"LAUNCHED_FAILING_RANK", "3"}});
  EXPECT_NE(outside.run.exit_code, 0) << outside.all;
  EXPECT_THAT(outside.run.out,
              HasSubstr("[launched rank 3 of 4, outside the test's 2] Failed\n"
                        "marker-SetUp-fatal on rank 3"))
      << outside.all;
  Report repeated =
      Launch("LaunchedFixtureFails.Body/*",
             {{"LAUNCHED_FAILS_IN", "SetUp-fatal"}, {"GTEST_REPEAT", "2"}});
  EXPECT_NE(repeated.run.exit_code, 0) << repeated.all;
  const std::string out = repeated.run.out;
  const std::string marker = "Failed\nmarker-SetUp-fatal on rank 2";
  const std::size_t first = out.find(marker);
  ASSERT_NE(first, std::string::npos) << repeated.all;
  EXPECT_NE(out.find(marker, first + 1), std::string::npos) << repeated.all;
  EXPECT_THAT(repeated.all, Not(HasSubstr("did not arrive"))) << repeated.all;
  const std::string dir = TempPath("-logs");
  Report fast = Launch("LaunchedFixtureFails.Body/*:LaunchedAfterTheFixture.*",
                       {{"LAUNCHED_FAILS_IN", "TearDown"},
                        {"GTEST_FAIL_FAST", "1"},
                        {"DISTTEST_LOG_DIR", dir}});
  EXPECT_NE(fast.run.exit_code, 0) << fast.all;
  EXPECT_THAT(fast.run.out, HasSubstr("Failed\nmarker-TearDown on rank 2"))
      << fast.all;
  // Every rank skips the next test, rank 1 too (whose own step passed):
  // none waits for another there.
  EXPECT_THAT(TestCaseXml(fast.xml, "Next/4ranks"),
              HasSubstr("result=\"skipped\""))
      << fast.xml;
  const std::string log = ReadFile(dir + "/rank-1.log");
  EXPECT_THAT(log,
              HasSubstr("[  SKIPPED ] LaunchedAfterTheFixture.Next/4ranks"))
      << log;
  std::filesystem::remove_all(dir);
}

// A rank that calls exit() in its body says so as its process ends: the
// others stop at once, naming it, not after its heartbeat's silence.
TEST_P(LaunchedTest, ExitInABodyIsSaidByTheRankItself) {
  Report r = Launch("Launched.ExitsOnRank2/*",
                    {{"OMPI_MCA_odls_base_sigkill_timeout", "2"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 2/4] did not report its result: called exit() "
                        "while Launched.ExitsOnRank2/4ranks ran (in its body, "
                        "or a thread of it): its process ended before the "
                        "test did"))
      << r.all;
  if (std::string(GetParam().name) != "mpirun") {
    // mpirun's SIGTERM may reach the others first; here they stop
    // themselves, with the rank's own word.
    EXPECT_THAT(r.run.out,
                HasSubstr("disttest cut their connections: rank 2: rank 2 "
                          "called exit() while Launched.ExitsOnRank2/4ranks "
                          "ran"))
        << r.all;
  }
  EXPECT_THAT(r.all, Not(HasSubstr("stopped its heartbeat"))) << r.all;
}

// A collective of every rank that one rank calls after the others passed
// and left can never complete: cut after a few heartbeats, saying so, not
// at the timeout (a spawned test's ranks see it at once). One of a pair
// whose slow member is still there goes on.
TEST_P(LaunchedTest, ACollectiveAfterThePeersPassedEndsSayingSo) {
  Report r =
      Launch("Launched.OneMoreBarrierOnRank3/*", {{"DISTTEST_TIMEOUT", "100"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("passed the test and left it (its last collective "
                        "there was #0) while this rank waited in barrier() "
                        "(collective #1 on the world communicator), which "
                        "needs all 4 ranks: it can never complete"))
      << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("Timed out"))) << r.all;
  Report valid = Launch(
      "Launched.PairWaitsForASlowPeer/*:Launched.BroadcastToASlowRank/*");
  EXPECT_EQ(valid.run.exit_code, 0) << valid.all;
}

// Calls that differ are a bug of the program: caught, they fail the test.
TEST_P(LaunchedTest, AMismatchTheTestCatchesFailsIt) {
  Report r = Launch("Launched.CaughtMismatchOfCalls/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  // At the call, with why it was cut.
  EXPECT_THAT(r.run.out, HasSubstr("the test caught disttest::CommError: "))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("(disttest cut the communicators: collective #1 on "
                        "the world communicator does not match across the "
                        "ranks: rank "))
      << r.all;
}

// A send and its receive of another count or element type never pair
// through Gloo: both wait, and the watchdogs compare what they wait in.
// Caught, the test fails all the same; a request's wait says it too.
TEST_P(LaunchedTest, AMismatchOfMessagesFailsAtOnce) {
  // (Each alone: the ranks cut the connections, and no test runs after.)
  Report r = Launch("Launched.CaughtMismatchOfMessages/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("Timed out"))) << r.all;
  const std::string at = "at launched_child_.cc:";
  EXPECT_THAT(
      TestCaseXml(r.xml, "CaughtMismatchOfMessages/4ranks"),
      AllOf(HasSubstr("the test caught disttest::CommError: "),
            HasSubstr("the 1st message from rank 0 to rank 1 with tag 3 on "
                      "the world communicator: its send and its receive do "
                      "not match"),
            HasSubstr("rank 0 called send(8 x float32 to rank 1, tag 3) " + at +
                      std::to_string(LineOf("marker-mismatched-send")) +
                      "; rank 1 called recv(16 x float32 from rank 0, tag 3) " +
                      at + std::to_string(LineOf("marker-mismatched-recv")))))
      << r.all;
  r = Launch("Launched.MismatchOfRequests/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  const std::string requests = TestCaseXml(r.xml, "MismatchOfRequests/4ranks");
  EXPECT_THAT(
      requests,
      HasSubstr("rank 2 called isend(4 x int32 to rank 3, tag 5) " + at +
                std::to_string(LineOf("marker-mismatched-isend")) +
                "; rank 3 called irecv(4 x float32 from rank 2, tag 5) " + at +
                std::to_string(LineOf("marker-mismatched-irecv"))))
      << r.all;
  EXPECT_THAT(requests, Not(HasSubstr("the test caught"))) << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("Timed out"))) << r.all;
}

TEST_P(LaunchedTest, DeadRankEndsTheRunPromptly) {
  // mpirun's SIGTERM 2 s after rank 2 died and its SIGKILL 2 s after that
  // (1 s each by default): time for rank 0's report and XML also on a
  // loaded machine, whose timing no test can promise.
  Report r = Launch("Launched.DiesOnRank2/*:Launched.AfterTheDeath/*",
                    {{"OMPI_MCA_odls_base_sigkill_timeout", "2"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_LT(r.run.elapsed, std::chrono::seconds(45)) << r.all;
  if (std::string(GetParam().name) != "mpirun") {
    // No launcher ended them: the others noticed themselves.
    EXPECT_THAT(r.all, HasSubstr("rank 2 stopped its heartbeat")) << r.all;
    EXPECT_THAT(r.run.out, HasSubstr("not run: the launched ranks stopped "
                                     "working together in an earlier test"));
    // The paragraph from the ledgers that came with the verdicts: the
    // survivors' barrier, and the rank that sent none.
    EXPECT_THAT(r.run.out,
                HasSubstr("collective #1 on the world communicator never "
                          "completed:\n  ranks 0-1, 3 (3 ranks) failed in "
                          "barrier() at launched_child_.cc:"))
        << r.all;
    EXPECT_THAT(r.run.out, HasSubstr("  rank 2 is not known here: its ledger "
                                     "did not come; it ended: failed"));
  } else {
    // mpirun's SIGTERM: rank 0 stops waiting for rank 2 500 ms after it,
    // in time to report and write the XML (it used to wait for the
    // heartbeat, 5 s, and was killed first). On a machine so loaded that
    // the heartbeat's verdict comes first, that one says it.
    EXPECT_THAT(r.run.out,
                ::testing::ContainsRegex(
                    "\\[rank 2/4\\] did not report its result: (none came in "
                    "the 500 ms after disttest got SIGTERM \\(mpirun ends "
                    "every rank once one has exited or died|stopped its "
                    "heartbeat)"))
        << r.all;
  }
  EXPECT_THAT(TestCaseXml(r.xml, "DiesOnRank2/4ranks"),
              HasSubstr("[rank 2/4] did not report its result"))
      << r.all << r.xml;
  // Where the survivors are (failed in the barrier, or still in it when
  // mpirun's SIGTERM came: Gloo may not have seen the closed connection
  // yet), and the dead rank not known.
  EXPECT_THAT(TestCaseXml(r.xml, "DiesOnRank2/4ranks"),
              AllOf(HasSubstr("collective #1 on the world communicator never "
                              "completed"),
                    HasSubstr("rank 2 is not known here: its ledger did not "
                              "come")))
      << r.xml;
  // After a signal the rest are skipped; else they fail, not run.
  EXPECT_THAT(
      TestCaseXml(r.xml, "AfterTheDeath/4ranks"),
      HasSubstr(std::string(GetParam().name) == "mpirun" ? "result=\"skipped\""
                                                         : "<failure"))
      << r.xml;
}

TEST_P(LaunchedTest, HungRankPrintsItsStacksAndTheRunEnds) {
  Report r = Launch("LaunchedShortTimeout.*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_LT(r.run.elapsed, std::chrono::seconds(60)) << r.all;
  EXPECT_THAT(r.all, HasSubstr("[ disttest ] rank 3: "
                               "LaunchedShortTimeout.HangsOnRank3/4ranks is "
                               "still in its body at the test's timeout; the "
                               "stacks of this process"));
  // Rank 3's stack shows where it hangs.
  EXPECT_THAT(r.all, ::testing::ContainsRegex("\\[rank 3\\] .*HangsOnRank3"))
      << r.all;
  EXPECT_THAT(r.all, HasSubstr("[ disttest ] rank 3: the body of "
                               "LaunchedShortTimeout.HangsOnRank3/4ranks does "
                               "not return; this process ends when rank 0 "
                               "has reported"));
  // The others' barrier gave up before the test's deadline (a tenth of it
  // earlier, as in a spawned rank) and named itself; their bodies returned,
  // and rank 0 reports the test, naming the rank that did not return.
  // (Ranks whose messages are the same are named together, once.)
  EXPECT_EQ(RanksNaming(r.run.out, "the test body threw disttest::CommError: "),
            (std::set<int>{0, 1, 2}))
      << r.all;
  EXPECT_EQ(RanksNaming(r.run.out, "barrier failed: "),
            (std::set<int>{0, 1, 2}))
      << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("Timed out waiting 2700ms")) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 3/4] did not report its result: it was still "
                        "in its body at the test's timeout (it printed its "
                        "stacks to its stderr)"));
  EXPECT_THAT(r.run.out, HasSubstr("[  FAILED  ] LaunchedShortTimeout."
                                   "HangsOnRank3/4ranks"));
  // The verdict starts with where each rank's collectives were at the
  // timeout, the hung rank's from its watchdog.
  EXPECT_THAT(r.run.out,
              HasSubstr(fmt::format(
                  "collective #1 on the world communicator never completed:\n"
                  "  ranks 0-2 (3 ranks) failed in barrier() at "
                  "launched_child_.cc:{} after 2.",
                  LineOf("marker-hang") + 2)))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("  rank 3 is not in it: its last collective, #0 "
                        "barrier() (disttest's, before the body), completed "))
      << r.all;
}

// A rank that fails and leaves the test while the others wait for it in a
// collective: after options().failure_grace their collectives are cut, as a
// spawned test's ranks are ended then, not at the test's timeout; the
// report says why.
TEST_P(LaunchedTest, ARankThatLeftFailingCutsTheOthersAfterTheGrace) {
  Report r = Launch("LaunchedShortGrace.FailsOnRank1WhileTheOthersWait/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              ::testing::ContainsRegex(
                  "disttest cut their connections: rank [023]: rank 1 failed "
                  "the test and left it, and this rank was still in it "
                  "[0-9]+ ms later \\(options\\(\\).failure_grace, and at "
                  "least four heartbeats\\)"))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 1/4] (first failure) Expected: (rank()) != "
                        "(1)"))
      << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("timed out"))) << r.all;
}

// The ranks that compute on past the grace while it left are not cut: the
// test fails for rank 1 alone, and the next test runs.
TEST_P(LaunchedTest, ARankThatLeftFailingLeavesTheOthersComputationAlone) {
  if (std::string(GetParam().name) != "torchrun") {
    GTEST_SKIP() << "the side thread's rule, the same under every launcher: "
                    "torchrun's case shows it";
  }
  Report r = Launch(
      "LaunchedShortGrace.FailsOnRank1WhileTheOthersCompute/"
      "*:LaunchedShortGrace.PassesAfterwards/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 1/4] Expected: (rank()) != (1), actual: 1 vs 1\n"
                        "marker-fails-while-others-compute\n[ disttest ] "
                        "rerun this test alone"))
      << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("cut"))) << r.all;
  EXPECT_THAT(TestCaseXml(r.xml, "PassesAfterwards/4ranks"),
              HasSubstr("result=\"completed\""))
      << r.xml;
  EXPECT_THAT(TestCaseXml(r.xml, "PassesAfterwards/4ranks"),
              Not(HasSubstr("<failure")))
      << r.xml;
}

// A rank that failed and left only because a peer died (its connection to
// it closed) is not taken for the cause: the waiting ranks hold their cut
// while a peer is silent, and the heartbeat names the dead one.
TEST_P(LaunchedTest, ARankThatLeftBecauseAPeerDiedIsNotTakenForTheCause) {
  if (std::string(GetParam().name) != "torchrun") {
    GTEST_SKIP() << "the side thread's rule, the same under every launcher: "
                    "torchrun's case shows it (mpirun ends the job itself "
                    "once a rank dies)";
  }
  // The heartbeat bound at 5 s in any build.
  Report r = Launch("LaunchedShortGrace.DiesOnRank2AndRank3FailsAtOnce/*",
                    {{"DISTTEST_TIMEOUT_SCALE", "1"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("disttest cut their connections: rank "))
      << r.all;
  EXPECT_THAT(r.run.out, ::testing::ContainsRegex(
                             "cut their connections: rank [01]: rank 2 "
                             "stopped its heartbeat"))
      << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("rank 3 failed the test and left it")))
      << r.all;
}

// --gtest_fail_fast under a launcher: every rank fails the test (rank 0
// with the report), so every rank skips the rest together.
TEST_P(LaunchedTest, FailFastSkipsTheRestOnEveryRank) {
  Report r = Launch("Launched.FailsOnRank1/*:Launched.SkipsEverywhere/*",
                    {{"GTEST_FAIL_FAST", "1"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[  FAILED  ] Launched.FailsOnRank1/4ranks"));
  EXPECT_THAT(r.run.out,
              HasSubstr("[  SKIPPED ] Launched.SkipsEverywhere/4ranks"));
  EXPECT_THAT(r.all, Not(HasSubstr("marker-external-skip"))) << r.all;
}

// DISTTEST_TIMEOUT_SCALE under a launcher: every rank's deadline is scaled
// (the barrier gives up at a tenth before the scaled timeout), and the
// reason says so.
TEST_P(LaunchedTest, TimeoutScaleReachesEveryRank) {
  Report r =
      Launch("LaunchedShortTimeout.*", {{"DISTTEST_TIMEOUT_SCALE", "0.5"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("Timed out waiting 1350ms")) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("disttest cut their connections: rank 3: "
                        "LaunchedShortTimeout.HangsOnRank3/4ranks timed out "
                        "(x0.5: DISTTEST_TIMEOUT_SCALE)"))
      << r.all;
}

// Ranks that called different collectives that all returned (no arena
// compares calls across hosts): rank 0's verdict fails the test from the
// ranks' ledgers, naming each rank's call.
TEST_P(LaunchedTest, CallsThatDifferFailTheTestThoughTheyReturned) {
  Report r = Launch("Launched.ReduceOpsDifferButReturn/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(
      r.run.out,
      HasSubstr(fmt::format(
          "collective #1 on the world communicator did not match across the "
          "ranks, though every call returned (the data is not what the test "
          "meant):\n  ranks 0-1 (2 ranks) called allreduce(8 x float32, sum) "
          "at launched_child_.cc:{}\n  ranks 2-3 (2 ranks) called "
          "allreduce(8 x float32, max) at launched_child_.cc:{}",
          LineOf("marker-launched-mismatch"),
          LineOf("marker-launched-mismatch"))))
      << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  FAILED  ] Launched."
                                   "ReduceOpsDifferButReturn/4ranks"));
}

TEST_P(LaunchedTest, CallsThatDifferFailOnAnUnnamedCommunicator) {
  Report r = Launch("Launched.ReduceOpsDifferOnAnUnnamedCommunicator/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(
      r.run.out,
      HasSubstr(fmt::format(
          "collective #0 on communicator \"gloo\" did not match across the "
          "ranks, though every call returned (the data is not what the test "
          "meant):\n  ranks 0-2 (3 ranks) called allreduce(2 x float32, sum) "
          "at launched_child_.cc:{}\n  rank 3 called "
          "allreduce(2 x float32, min) at launched_child_.cc:{}",
          LineOf("marker-launched-unnamed"),
          LineOf("marker-launched-unnamed"))))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[  FAILED  ] Launched."
                        "ReduceOpsDifferOnAnUnnamedCommunicator/4ranks"));
}

// Ranks that wait in a collective entered with different operations fail
// at once: the calls meet in the store, and the run ends with both.
TEST_P(LaunchedTest, RanksWaitingInCollectivesThatDifferFailAtOnce) {
  Report r = Launch("Launched.OperationsDifferAndWait/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_LT(r.run.elapsed, std::chrono::seconds(30)) << r.all;  // Timeout 60.
  const std::string allreduce =
      fmt::format("called allreduce(8 x float32, sum) at launched_child_.cc:{}",
                  LineOf("marker-live-allreduce"));
  const std::string allgather = fmt::format(
      "rank 3 called allgather(8 x float32) at launched_child_.cc:{}",
      LineOf("marker-live-allgather"));
  EXPECT_THAT(r.run.out,
              HasSubstr("the launched ranks stopped working together in this "
                        "test, and disttest cut their connections: rank "))
      << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("collective #0 on communicator \"live\" "
                                   "does not match across the ranks: rank "))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("collective #0 on communicator \"live\" does not "
                        "match across the ranks:\n  ranks 0-2 (3 ranks) failed "
                        "in allreduce(8 x float32, sum)"))
      << r.all;
  EXPECT_THAT(r.all, HasSubstr(allreduce)) << r.all;
  EXPECT_THAT(r.all, HasSubstr(allgather)) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  FAILED  ] Launched."
                                   "OperationsDifferAndWait/4ranks"));
  // The error left the body: said once, not again as caught.
  EXPECT_THAT(r.run.out, Not(HasSubstr("the test caught"))) << r.all;
}

// DIST_TEST_P and DIST_TYPED_TEST under a launcher: one report per
// parameter and type, every rank with its parameter.
TEST_P(LaunchedTest, ParameterizedAndTypedTestsRunInEveryRank) {
  Report r = Launch("Values/LaunchedSweep.*:LaunchedTyped/*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 6 tests.")) << r.all;
  for (const char* line :
       {"marker-param 1 of 2: 3\n", "marker-param 3 of 4: 7\n",
        "marker-typed 3: 8 bytes\n", "marker-typed 2: 4 bytes\n"}) {
    EXPECT_THAT(r.run.err, HasSubstr(line)) << r.all;
  }
  EXPECT_THAT(r.xml, HasSubstr("<testcase name=\"SumsTheParameter/4ranks/1\" "
                               "value_param=\"7\""));
  EXPECT_THAT(r.xml, HasSubstr("<testcase name=\"SumsInItsType/4ranks\" "
                               "type_param=\"float\""));
}

// DISTTEST_TRACE under a launcher: rank 0 writes each test's trace from
// every rank's whole ledger, on its own clock (the ranks' times come as
// ages, placed by the wall clock of their reads), with each rank's
// failures; a failing test prints the path.
TEST_P(LaunchedTest, TraceHasEveryRanksTimelineOnOneClock) {
  const std::string dir = TempPath(".trace");
  Report r = Launch("Launched.Passes/4ranks:Launched.FailsOnRank1/*",
                    {{"DISTTEST_TRACE", dir}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[ disttest ] its timeline (Perfetto, chrome://"
                        "tracing): " +
                        dir + "/Launched.FailsOnRank1.4ranks.trace.json"))
      << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("Launched.Passes.4ranks.trace.json")));
  struct Track {
    std::set<std::string> spans;
    std::map<std::string, std::pair<double, double>> ops;  // From, to.
    int failures = 0;
  };
  auto read = [&](const std::string& test) {
    std::map<int, Track> tracks;
    nlohmann::json trace = nlohmann::json::parse(
        ReadFile(fmt::format("{}/Launched.{}.4ranks.trace.json", dir, test)));
    for (const auto& e : trace["traceEvents"]) {
      const int tid = e["tid"].get<int>();
      if (e["ph"] == "i" && e["name"] == "failure") ++tracks[tid].failures;
      if (e["ph"] != "X") continue;
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
      std::string name = e["name"];
      if (e["cat"] == "collective") {
        name += fmt::format(" #{} {} {}", e["args"]["number"].get<int>(),
                            e["args"]["called"].get<std::string>(),
                            e["args"]["state"].get<std::string>());
        const double from = e["ts"].get<double>();
        tracks[tid].ops[name] = {from, from + e["dur"].get<double>()};
      }
      tracks[tid].spans.insert(name);
    }
    return tracks;
  };
  const std::string sum = fmt::format(
      "allreduce(1 x int32, sum) #1 at launched_child_.cc:{} "
      "completed",
      LineOf("marker-sum"));
  const std::string barrier =
      "barrier() #0 (disttest's, before the body) completed";
  std::map<int, Track> passes = read("Passes");
  ASSERT_EQ(passes.size(), 4u) << r.all;
  double entered = 0;
  double left = 1e300;
  for (auto& [rank, track] : passes) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    for (const char* phase : {"connect", "set-up", "body", "tear-down"}) {
      EXPECT_EQ(track.spans.count(phase), 1u) << phase;
    }
    EXPECT_EQ(track.spans.count(barrier), 1u);
    EXPECT_EQ(track.spans.count(sum), 1u);
    EXPECT_EQ(track.failures, 0);
    entered = std::max(entered, track.ops[barrier].first);
    left = std::min(left, track.ops[barrier].second);
  }
  // One clock: no rank left the barrier before the last one entered it
  // (a millisecond for reading two clocks).
  EXPECT_LE(entered, left + 1000.0);
  std::map<int, Track> fails = read("FailsOnRank1");
  ASSERT_EQ(fails.size(), 4u) << r.all;
  for (auto& [rank, track] : fails) {
    EXPECT_EQ(track.failures, rank == 1 ? 1 : 0) << rank;
    EXPECT_EQ(track.spans.count("body"), 1u) << rank;
  }
  std::filesystem::remove_all(dir);
}

// mpirun kills a rank 1 s after its SIGTERM: a rank outside any operation
// takes no stacks (3 s), and rank 0 stops waiting for it in time to report
// the test and write the XML (it used to wait and was killed first).
// (Only mpirun kills so soon; the others wait: TermDuringATest... below.)
class LaunchedMpirunTest : public LaunchedTest {};

TEST_P(LaunchedMpirunTest,
       TermUnderMpirunLeavesNoTimeForStacksButTheXmlIsWritten) {
  bool sent = false;
  // SIGKILL 3 s after the SIGTERM (1 s by default): time for the report and
  // the XML on a loaded machine, and still too little for stacks.
  Report r = Launch(
      "Launched.SleepsOnRank1UntilSignal/*:Launched.AfterTheSignal/4ranks",
      {{"OMPI_MCA_odls_base_sigkill_timeout", "3"}},
      [&](pid_t pid, const std::string& out, const std::string&) {
        if (!sent &&
            out.find("marker-sleeps-for-signal 0") != std::string::npos) {
          kill(pid, SIGTERM);
          sent = true;
        }
      });
  ASSERT_TRUE(sent) << r.all;
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  // Rank 1 says its body does not return an eighth of the 3 s after the
  // SIGTERM; rank 0 stops waiting at a quarter. On a machine so loaded that
  // rank 1's word comes later, rank 0's cut says it.
  const std::string tc = TestCaseXml(r.xml, "SleepsOnRank1UntilSignal/4ranks");
  EXPECT_THAT(tc, ::testing::ContainsRegex(
                      "\\[rank 1/4\\] did not report its result: (its body "
                      "was still running when disttest got SIGTERM|none came "
                      "in the 750 ms after disttest got SIGTERM)"))
      << r.all << r.xml;
  EXPECT_THAT(TestCaseXml(r.xml, "AfterTheSignal/4ranks"),
              HasSubstr("result=\"skipped\""))
      << r.xml;
  EXPECT_THAT(r.all, HasSubstr("no time for its stacks: mpirun sends SIGKILL "
                               "3000 ms after its SIGTERM"))
      << r.all;
  EXPECT_THAT(r.all, Not(HasSubstr("[rank 1] ")));  // No stack lines.
}

// SIGTERM to the launcher (ctest's TIMEOUT, a cancelled job), which passes
// it on to the ranks: the test in flight fails with its report, the rest
// are skipped, rank 0 writes the XML, and the ranks end by the signal.
TEST_P(LaunchedTest, TermDuringATestFailsItWithItsReportAndSkipsTheRest) {
  // SIGINT too, where the launcher passes it on as it came (mpirun turns
  // it into the end of the job).
  const bool mpirun = std::string(GetParam().name) == "mpirun";
  for (int sig :
       mpirun ? std::vector<int>{SIGTERM} : std::vector<int>{SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    bool sent = false;
    auto sent_at = std::chrono::steady_clock::now();
    Report r =
        Launch("Launched.WaitsForSignal/*:Launched.AfterTheSignal/4ranks", {},
               [&](pid_t pid, const std::string& out, const std::string&) {
                 if (!sent && out.find("marker-waits-for-signal 0") !=
                                  std::string::npos) {
                   kill(pid, sig);
                   sent = true;
                   sent_at = std::chrono::steady_clock::now();
                 }
               });
    const auto after = std::chrono::steady_clock::now() - sent_at;
    ASSERT_TRUE(sent) << r.all;
    EXPECT_NE(r.run.exit_code, 0) << r.all;
    if (!mpirun) {
      EXPECT_EQ(r.run.exit_code, 128 + sig) << r.all;
    }
    // A SIGTERM is first the launcher's, and said so.
    const std::string name = GetParam().name;
    const std::string term =
        name == "mpirun"
            ? "SIGTERM (mpirun ends every rank once one has exited or died; "
              "or the job was cancelled, ctest's TIMEOUT)"
        : name == "slurm"
            ? "SIGTERM (Slurm ends a step at its time limit, on scancel, or "
              "with --kill-on-bad-exit once a task failed; or ctest's "
              "TIMEOUT)"
            : "SIGTERM (torchrun ends the other ranks once one failed; or the "
              "job was cancelled, ctest's TIMEOUT)";
    const std::string why =
        fmt::format("disttest got {} while Launched.WaitsForSignal/4ranks ran",
                    sig == SIGTERM ? term : "SIGINT (Ctrl-C)");
    EXPECT_THAT(r.run.out, HasSubstr(why)) << r.all;
    EXPECT_THAT(r.run.out, HasSubstr("recv of 8 float32 from rank 0 (tag 9)"))
        << r.all;
    EXPECT_THAT(r.run.out, HasSubstr("the tests after it are skipped, gtest "
                                     "writes its XML and JSON"))
        << r.all;
    const std::string& x = r.xml;
    EXPECT_THAT(TestCaseXml(x, "WaitsForSignal/4ranks"), HasSubstr("<failure"))
        << x;
    EXPECT_THAT(TestCaseXml(x, "AfterTheSignal/4ranks"),
                HasSubstr("result=\"skipped\""))
        << x;
    // The stacks (at most 3 s), the cut, the reports and the files.
    EXPECT_LT(after, std::chrono::seconds(15)) << r.all;
  }
}

// A rank dies and the launcher's SIGTERM comes before its silence reached
// the heartbeat bound (srun --kill-on-bad-exit): rank 0 stops waiting for
// its result at the cut, and still says that it went silent, so the report
// names the rank that died, not only the signal.
TEST_P(LaunchedTest, ADeadRankCutAtTheSignalIsStillNamedDead) {
  if (std::string(GetParam().name) != "slurm") {
    GTEST_SKIP() << "Slurm's case (--kill-on-bad-exit); mpirun ends the job "
                    "itself once a rank dies (DeadRankEndsTheRunPromptly), "
                    "torchrun's SIGTERM is handled alike";
  }
  // The bound at 7.5 s in any build: rank 0 stops waiting 6 s after the
  // SIGTERM, first; by then rank 2 has been silent 4.5 s or more (counted
  // from rank 0's first look), past 2/5 of the bound.
  Report r = Launch(
      "Launched.DiesOnRank2ThenTheLauncherEnds/*:Launched.AfterTheSignal/"
      "4ranks",
      {{"DISTTEST_TIMEOUT_SCALE", "1.5"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out,
              ::testing::ContainsRegex(
                  "\\[rank 2/4\\] (\\(first failure\\) )?did not report "
                  "its result: none came in the 6000 ms after disttest got "
                  "SIGTERM \\([^\n]*\\), and it stopped its heartbeat "
                  "[0-9]+ ms ago: it died, or its machine stalls"))
      << r.all;
  // The others, in the barrier, were cut: no such words for them.
  EXPECT_THAT(r.run.out, Not(::testing::ContainsRegex(
                             "\\[rank [013]/4\\][^\n]*stopped its heartbeat")))
      << r.all;
  EXPECT_THAT(TestCaseXml(r.xml, "AfterTheSignal/4ranks"),
              HasSubstr("result=\"skipped\""))
      << r.xml;
}

// The rank environment a body sees is its test's; after the test, the
// launcher's is back as it was on every rank.
TEST_P(LaunchedTest, TheLauncherEnvironmentComesBackAfterATest) {
  Report r =
      Launch("Launched.SeesItsOwnRankEnvironment/*:LaunchedAfterwards.*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 2 tests.")) << r.all;
}

TEST_P(LaunchedTest, RanksAtDifferentTestsFailLoudly) {
  Report r = Launch("Launched.*OnlyOnRankOne*:Launched.Passes/4ranks",
                    {{"LAUNCHED_OUT_OF_STEP", "1"}});
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(
      r.run.out,
      HasSubstr("the launched ranks would not run the same tests alike: "
                "rank 1 runs 1 test rank 0 does not "
                "(Launched.AOnlyOnRankOne/4ranks)"))
      << r.all;
}

// Ranks given other tests or another WORLD_SIZE than rank 0: every test
// fails at once, naming the rank and the difference. Before, rank 1 with
// fewer tests exited 0 while rank 0 waited out the timeout; with extra
// tests, rank 0's report was clean; WORLD_SIZE=8 on one of 4 ranks was
// never noticed.
TEST(LaunchedPlans, RanksThatWouldRunOtherTestsEndAtOnceNamingTheDifference) {
  struct Case {
    const char* name;
    const char* rank;   // the rank that differs
    const char* extra;  // what it gets beyond the others' command line
    const char* said;
  };
  for (const Case& c : {
           Case{"fewer", "1", "--gtest_filter=Launched.Passes/1ranks",
                "rank 1 lacks 1 of rank 0's 2 tests (Launched.Passes/4ranks)"},
           Case{"more", "2",
                "--gtest_filter=Launched.Passes/*:Launched.SkipsEverywhere/*",
                "rank 2 runs 2 tests rank 0 does not "
                "(Launched.Passes/2ranks, Launched.SkipsEverywhere/4ranks)"},
           Case{"world", "3", "WORLD_SIZE=8",
                "rank 3 says WORLD_SIZE=8 (rank 0: 4)"},
           // Its communicators would rendezvous on other keys: every test
           // waited out its timeout, blamed on a rank "in its body".
           Case{"timeout", "1", "DISTTEST_TIMEOUT=90",
                "rank 1 runs with DISTTEST_TIMEOUT=90 (rank 0: "
                "DISTTEST_TIMEOUT=60)"},
       }) {
    SCOPED_TRACE(c.name);
    const bool env = std::string(c.extra).rfind("--", 0) != 0;
    // On the differing rank only: a variable, or a later --gtest_filter
    // (the last one wins).
    const std::string script = fmt::format(
        "if [ \"$RANK\" = {} ]; then {} exec \"$@\" {}; fi; exec \"$@\"",
        c.rank, env ? std::string("export ") + c.extra + ";" : "",
        env ? "" : c.extra);
    ChildRun run = RunChild(
        {DISTTEST_LOCAL_LAUNCHER, "torchrun", "4", "/bin/sh", "-c", script,
         "sh", DISTTEST_LAUNCHED_CHILD,
         "--gtest_filter=Launched.Passes/1ranks:Launched.Passes/4ranks"},
        {{"DISTTEST_TIMEOUT", "60"}, LauncherPort("torchrun")},
        std::chrono::seconds(120));
    EXPECT_FALSE(run.timed_out);
    EXPECT_NE(run.exit_code, 0) << run.out << run.err;
    // Rank 0's finding, or the differing rank's own word (it breaks the
    // run at once): either names the rank and the difference.
    EXPECT_THAT(run.out, HasSubstr("the launched ranks would not run the same "
                                   "tests alike: " +
                                   std::string(c.said)))
        << run.out << run.err;
    // At once: not at the 60 s timeout.
    EXPECT_LT(run.elapsed, std::chrono::seconds(30)) << run.out << run.err;
    EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
  }
}

// DISTTEST_LAUNCHER names the mode: "launched" (or "external", its old
// name) makes a one-rank launcher's process a launched run, which it is not
// by itself; any other word is an error that names the two.
TEST(LaunchedAlone, LauncherVariableNamesTheLaunchedModeOrSpawn) {
  for (const char* mode : {"launched", "external", "", "bogus"}) {
    SCOPED_TRACE(mode);
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", "0"},
        {"WORLD_SIZE", "1"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(FreePort())}};
    if (*mode != '\0') env.emplace_back("DISTTEST_LAUNCHER", mode);
    ChildRun run = RunChild(
        {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=Launched.Passes/1ranks"}, env,
        std::chrono::seconds(60));
    const std::string all = run.out + run.err;
    const bool launched =
        std::string(mode) == "launched" || std::string(mode) == "external";
    if (std::string(mode) == "bogus") {
      EXPECT_NE(run.exit_code, 0) << all;
      EXPECT_THAT(all, HasSubstr("DISTTEST_LAUNCHER=bogus: expected "
                                 "\"launched\" or \"spawn\""));
    } else {
      EXPECT_EQ(run.exit_code, 0) << all;
      EXPECT_EQ(
          all.find("launched by torchrun with 1 rank") != std::string::npos,
          launched)
          << all;
    }
    EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
  }
}

// A Slurm batch script's own shell (SLURM_PROCID=0, the job's task count,
// no step) runs its tests as anywhere else, spawning their ranks.
TEST(LaunchedAlone, SlurmBatchScriptSpawnsItsRanks) {
  ChildRun run = RunChild(
      {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=Launched.Passes/2ranks"},
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "77"}},
      std::chrono::seconds(60));
  const std::string all = run.out + run.err;
  EXPECT_EQ(run.exit_code, 0) << all;
  EXPECT_THAT(all, HasSubstr("[       OK ] Launched.Passes/2ranks")) << all;
  EXPECT_THAT(all, Not(HasSubstr("launched by"))) << all;
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
}

// A launcher environment without a launcher (inherited from an enclosing
// job): the rank says what it detected and why it stops, instead of
// waiting in silence and exiting without a word.
TEST(LaunchedAlone, RankWithoutItsPeersSaysWhyItStops) {
  const std::string port = std::to_string(FreePort());
  ChildRun run = RunChild(
      {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=Launched.Passes/2ranks"},
      {{"RANK", "1"},
       {"WORLD_SIZE", "2"},
       {"MASTER_ADDR", "127.0.0.1"},
       {"MASTER_PORT", port},
       {"DISTTEST_TIMEOUT", "2"}},
      std::chrono::seconds(60));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(
      run.err,
      HasSubstr("[ disttest ] rank 1 of 2, launched by torchrun: rank "
                "0 (at 127.0.0.1:" +
                port + ") serves the store and reports for every rank"));
  // On which host: across nodes, that is which node.
  EXPECT_THAT(run.err, ContainsRegex("\\[ disttest \\] rank 1 of 2 on [^ ]+ "
                                     "\\(launched by torchrun\\) cannot join "
                                     "the launched ranks: cannot connect to "
                                     "store at 127\\.0\\.0\\.1:" +
                                     port));
  EXPECT_THAT(run.err, HasSubstr("run it with DISTTEST_LAUNCHER=spawn"));
  EXPECT_LT(run.elapsed, std::chrono::seconds(30));
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
}

// Rank 0, done with its tests, does not wait for a rank that never reached
// the store (each test failed naming it), and says so.
TEST(LaunchedAlone, RankZeroDoesNotWaitAtTheEndForARankThatNeverCame) {
  const std::string port = std::to_string(FreePort());
  ChildRun run = RunChild(
      {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=Launched.Passes/2ranks"},
      {{"RANK", "0"},
       {"WORLD_SIZE", "2"},
       {"MASTER_ADDR", "127.0.0.1"},
       {"MASTER_PORT", port},
       {"DISTTEST_TIMEOUT", "1"}},
      std::chrono::seconds(60));
  EXPECT_THAT(run.out, HasSubstr("[  FAILED  ] Launched.Passes/2ranks"));
  EXPECT_THAT(run.out, HasSubstr("rank 1 did not arrive before the test's "
                                 "timeout; rank 1 never reached the store at "
                                 "127.0.0.1:" +
                                 port));
  EXPECT_THAT(run.err, HasSubstr("[ disttest ] rank 0: rank 1 never reached "
                                 "the store at 127.0.0.1:" +
                                 port + "; not waiting for it"));
  EXPECT_THAT(run.err, Not(HasSubstr("waiting up to")));
  EXPECT_LT(run.elapsed, std::chrono::seconds(20));
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Launchers, LaunchedTest,
                         ::testing::Values(Launcher{"torchrun"},
                                           Launcher{"slurm"},
                                           Launcher{"mpirun"}),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });
INSTANTIATE_TEST_SUITE_P(Launchers, LaunchedMpirunTest,
                         ::testing::Values(Launcher{"mpirun"}),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace disttest::testing
