// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest::mpi_comm() (disttest/mpi.h): mpi_comm_child_ under `mpirun -np 4`,
// under torchrun's variables (local-launcher.sh), and alone; Backend::kMpi:
// mpi_backend_child_ under mpirun and alone (mpiexec starts its ranks).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "self/child_process.h"
#include "support/loopback_socket.h"

namespace disttest::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Report {
  ChildRun run;
  std::string xml;
  std::string all;
};

Report RunMpiChild(std::vector<std::string> launcher, const std::string& filter,
                   std::vector<std::pair<std::string, std::string>> env = {},
                   const char* child = DISTTEST_MPI_COMM_CHILD) {
  const std::string xml_path = TempPath(".xml");
  std::vector<std::string> args = std::move(launcher);
  for (const std::string& arg :
       {std::string(child), "--gtest_filter=" + filter,
        std::string("--gtest_color=no"), "--gtest_output=xml:" + xml_path}) {
    args.push_back(arg);
  }
  Report r;
  r.run = RunChild(args, env, std::chrono::seconds(120));
  r.xml = ReadFile(xml_path);
  r.all = r.run.out + r.run.err;
  std::filesystem::remove(xml_path);
  EXPECT_FALSE(r.run.timed_out) << r.all;
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
  return r;
}

std::vector<std::string> Mpirun() {
  std::vector<std::string> args = {"/usr/bin/mpirun", "--oversubscribe", "-np",
                                   "4"};
  if (getuid() == 0) args.push_back("--allow-run-as-root");
  args.insert(args.end(), {"-x", "MASTER_ADDR=127.0.0.1", "-x",
                           fmt::format("MASTER_PORT={}", FreePort())});
  return args;
}

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/mpirun", X_OK) != 0) {
      GTEST_SKIP() << "mpirun is not installed (Debian: openmpi-bin)";
    }
  }
};

// Each test's communicator is exactly its ranks (2 of -np 4 too), and a
// message one test left unreceived never reaches the next.
TEST_F(MpiTest, EachTestHasACommunicatorOfItsRanks) {
  Report r =
      RunMpiChild(Mpirun(), "Mpi.*:-Mpi.FailsOnRank1/*:Mpi.CrashesOnRank1/*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 5 tests.")) << r.all;
  for (const char* line :
       {"marker-mpi rank 0 of 1\n", "marker-mpi rank 1 of 2\n",
        "marker-mpi rank 3 of 4\n"}) {
    EXPECT_THAT(r.run.err, HasSubstr(line)) << r.all;
  }
  EXPECT_THAT(r.run.err, Not(HasSubstr("marker-mpi rank 2 of 2")));
  EXPECT_THAT(TestCaseXml(r.xml, "SeesNoMessageOfTheTestBefore/2ranks"),
              Not(HasSubstr("<failure")))
      << r.xml;
}

// A failure after an MPI collective is its rank's, reported once by rank 0.
TEST_F(MpiTest, FailureIsReportedForItsRank) {
  Report r = RunMpiChild(Mpirun(), "Mpi.FailsOnRank1/*");
  EXPECT_NE(r.run.exit_code, 0) << r.all;
  EXPECT_EQ(Occurrences(r.run.out, "[rank 1/2] "), 1u) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("marker-mpi-fail")) << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("[rank 0/2]"))) << r.all;
}

// Outside a rank's test, mpi_comm() says where it may be called.
TEST_F(MpiTest, OutsideARankItSaysWhere) {
  Report r = RunMpiChild(Mpirun(), "MpiOutsideARank.*");
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("marker-outside disttest::mpi_comm() is "
                                   "called outside a rank's test"))
      << r.all;
}

// LaunchMode::kMpiexec (DISTTEST_LAUNCH=mpiexec): a plain run starts each
// test's ranks with mpiexec, and rank 0's report is the test's.
TEST_F(MpiTest, MpiexecRunsMpiCodeInAPlainRun) {
  Report r = RunMpiChild({}, "Mpi.*:-Mpi.FailsOnRank1/*:Mpi.CrashesOnRank1/*",
                         {{"DISTTEST_LAUNCH", "mpiexec"}});
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 5 tests.")) << r.all;
  EXPECT_THAT(TestCaseXml(r.xml, "CommunicatorHoldsTheTestsRanks/4ranks"),
              HasSubstr("result=\"completed\""))
      << r.xml;
}

// A failure, a crash and a hang under mpiexec fail their tests for their
// rank: at the failure's line, with the signal, with the hung rank's
// stacks; each with the line that reruns it, and nothing left behind.
TEST_F(MpiTest, MpiexecReportsFailuresCrashesAndHangsPerRank) {
  const std::pair<std::string, std::string> mode{"DISTTEST_LAUNCH", "mpiexec"};
  Report failed = RunMpiChild({}, "Mpi.FailsOnRank1/*", {mode});
  EXPECT_EQ(failed.run.exit_code, 1) << failed.all;
  EXPECT_THAT(failed.run.out,
              HasSubstr(fmt::format(
                  "mpi_comm_child_.cc:{}: Failure\n[rank "
                  "1/2] Expected: (rank()) != (1)",
                  LineIn(DISTTEST_MPI_COMM_CHILD_SOURCE, "marker-mpi-fail"))))
      << failed.all;
  EXPECT_THAT(failed.run.out,
              HasSubstr("rerun this test alone: DISTTEST_LAUNCH=mpiexec"))
      << failed.all;

  Report crashed = RunMpiChild({}, "Mpi.CrashesOnRank1/*", {mode});
  EXPECT_EQ(crashed.run.exit_code, 1) << crashed.all;
  EXPECT_THAT(crashed.run.out,
              HasSubstr("[rank 1/2] was killed by signal 11 (Segmentation "
                        "fault), mpiexec says"))
      << crashed.all;

  Report hung = RunMpiChild({}, "MpiShort.HangsOnRank1/*", {mode});
  EXPECT_EQ(hung.run.exit_code, 1) << hung.all;
  EXPECT_THAT(hung.run.out,
              HasSubstr("[rank 1/2] did not report its result: it was still "
                        "in its body at the test's timeout"))
      << hung.all;
  EXPECT_THAT(
      hung.run.out,
      HasSubstr(fmt::format(
          "mpi_comm_child_.cc:{}",
          LineIn(DISTTEST_MPI_COMM_CHILD_SOURCE, "marker-mpi-hang") + 1)))
      << hung.all;
}

// A skip under mpiexec is the test's skip, with rank 0's reason; a pass
// that a rank's end contradicts (its process ended with status 3 after rank
// 0 reported), or ranks that never ran the test, are failures. Rank 0's
// report goes with its directory.
TEST_F(MpiTest, MpiexecSkipsAsRankZeroSaysAndNoPassWithoutARun) {
  // A TMPDIR of this test's own: other tests' mpiexec runs may have their
  // report directories in the machine's meanwhile.
  const std::string tmp = TempPath(".tmpdir");
  std::filesystem::create_directory(tmp);
  const std::pair<std::string, std::string> mode{"DISTTEST_LAUNCH", "mpiexec"};
  const std::pair<std::string, std::string> own_tmp{"TMPDIR", tmp};
  Report skipped =
      RunMpiChild({}, "MpiEnds.SkipsEverywhere/*", {mode, own_tmp});
  EXPECT_EQ(skipped.run.exit_code, 0) << skipped.all;
  EXPECT_THAT(skipped.run.out, HasSubstr("all 2 ranks skipped: "
                                         "marker-mpi-skip"))
      << skipped.all;
  EXPECT_THAT(skipped.run.out, HasSubstr("[  SKIPPED ] 1 test")) << skipped.all;
  Report exited =
      RunMpiChild({}, "MpiEnds.ExitsWithThreeAfterItsPass/*", {mode, own_tmp});
  EXPECT_EQ(exited.run.exit_code, 1) << exited.all;
  EXPECT_THAT(exited.run.out, HasSubstr("rank 0 reported the test passed, but "
                                        "mpiexec ended with a failure"))
      << exited.all;
  // Ranks that ran no test (a global SetUp skipped them) gave no verdict.
  Report none = RunMpiChild({}, "Mpi.CommunicatorHoldsTheTestsRanks/2ranks",
                            {mode, own_tmp, {"MPI_CHILD_SKIP_ALL", "1"}});
  EXPECT_EQ(none.run.exit_code, 1) << none.all;
  EXPECT_THAT(none.run.out, HasSubstr("mpiexec ended without rank 0's report "
                                      "of the test"))
      << none.all;
  for (const auto& entry : std::filesystem::directory_iterator(tmp)) {
    EXPECT_EQ(entry.path().filename().string().rfind("disttest-mpiexec-", 0),
              std::string::npos)
        << entry.path();
  }
  std::filesystem::remove_all(tmp);
}

// No mpiexec: the test is skipped, saying so; one that is not MPI's is an
// error that says what it is.
TEST_F(MpiTest, MpiexecMissingSkipsAndAStrangerFails) {
  Report none =
      RunMpiChild({}, "Mpi.CommunicatorHoldsTheTestsRanks/2ranks",
                  {{"DISTTEST_LAUNCH", "mpiexec"}, {"PATH", "/nonexistent"}});
  EXPECT_EQ(none.run.exit_code, 0) << none.all;
  EXPECT_THAT(none.run.out, HasSubstr("LaunchMode::kMpiexec: no mpiexec on "
                                      "PATH (set MPIEXEC_EXECUTABLE"))
      << none.all;
  EXPECT_THAT(none.run.out, HasSubstr("[  SKIPPED ] 1 test")) << none.all;
  Report script = RunMpiChild(
      {}, "Mpi.CommunicatorHoldsTheTestsRanks/2ranks",
      {{"DISTTEST_LAUNCH", "mpiexec"}, {"MPIEXEC_EXECUTABLE", "/bin/true"}});
  EXPECT_EQ(script.run.exit_code, 1) << script.all;
  EXPECT_THAT(script.run.out, HasSubstr("LaunchMode::kMpiexec: /bin/true is "
                                        "not MPI's mpiexec"))
      << script.all;
}

// Ranks that disttest spawned (a plain run), or another launcher's, have no
// MPI job: each such test fails saying how to run it.
TEST_F(MpiTest, WithoutAnMpiLauncherEachTestSaysHowToRunIt) {
  Report alone = RunMpiChild({}, "Mpi.CommunicatorHoldsTheTestsRanks/2ranks");
  EXPECT_EQ(alone.run.exit_code, 1) << alone.all;
  EXPECT_THAT(alone.run.out,
              HasSubstr("disttest::mpi_comm() needs ranks that an MPI "
                        "launcher started: run the test binary under `mpirun "
                        "-np N`"))
      << alone.all;
  Report torchrun = RunMpiChild({DISTTEST_LOCAL_LAUNCHER, "torchrun", "2"},
                                "Mpi.CommunicatorHoldsTheTestsRanks/2ranks",
                                {LauncherPort("torchrun")});
  EXPECT_EQ(torchrun.run.exit_code, 1) << torchrun.all;
  EXPECT_THAT(torchrun.run.out,
              HasSubstr("this run's ranks were started by torchrun, which "
                        "starts no MPI job: run it under `mpirun -np 2`"))
      << torchrun.all;
}

// Backend::kMpi under mpirun: every operation of comm() is MPI's and
// matches a serial program's result, at 1, 2 and 4 ranks of -np 4, beside
// the test's own MPI communicator; launch()'s groups are MPI's too.
TEST_F(MpiTest, BackendMpiRunsEveryOperation) {
  Report r =
      RunMpiChild(Mpirun(), "MpiBackend.CollectivesMatch*:MpiBackendGroups.*",
                  {}, DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 4 tests.")) << r.all;
  for (const char* line :
       {"marker-mpi-backend rank 0 of 1\n", "marker-mpi-backend rank 1 of 2\n",
        "marker-mpi-backend rank 3 of 4\n"}) {
    EXPECT_THAT(r.run.err, HasSubstr(line)) << r.all;
  }
}

// In a plain run a Backend::kMpi test's ranks are started by mpiexec, with
// nothing set: the same results, and the XML says how it ran.
TEST_F(MpiTest, BackendMpiInAPlainRunIsStartedByMpiexec) {
  Report r = RunMpiChild({}, "MpiBackend.CollectivesMatch*/2ranks", {},
                         DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 1 test.")) << r.all;
  const std::string test =
      TestCaseXml(r.xml, "CollectivesMatchASerialReference/2ranks");
  EXPECT_THAT(test, HasSubstr("disttest_backend\" value=\"mpi\"")) << r.xml;
  EXPECT_THAT(test, HasSubstr("disttest_launch\" value=\"mpiexec\"")) << r.xml;
}

// Ranks that call a collective with different counts, or a recv that
// expects another count than its send: every rank of the collective fails
// at once naming each rank's call, before any data is used (the bodies check
// their buffers), under mpirun and under a plain run alike.
TEST_F(MpiTest, BackendMpiFailsCallsThatDifferBeforeTheirDataIsUsed) {
  for (const bool plain : {false, true}) {
    Report r = RunMpiChild(
        plain ? std::vector<std::string>{} : Mpirun(),
        "MpiBackend.CountsDifferOnRank1/*:MpiBackend.RecvExpectsAnotherCount/*",
        {}, DISTTEST_MPI_BACKEND_CHILD);
    EXPECT_EQ(r.run.exit_code, 1) << r.all;
    EXPECT_THAT(r.run.out,
                HasSubstr("[rank 1/3] the test body threw "
                          "disttest::CommError: [rank 1/3] allreduce of 4 "
                          "float32 (sum) failed: collective #1 does not match "
                          "across the 3 ranks: ranks 0, 2: allreduce(8 x "
                          "float32, sum); rank 1: allreduce(4 x float32, sum)"))
        << r.all;
    EXPECT_THAT(r.run.out,
                HasSubstr("[rank 1/2] the test body threw "
                          "disttest::CommError: [rank 1/2] recv of 4 int32 "
                          "from rank 0 (tag 3) failed: rank 0 sent 8 int32 "
                          "with tag 3; this rank expected 4 int32"))
        << r.all;
    EXPECT_THAT(r.run.out, Not(HasSubstr("the buffer was used"))) << r.all;
    EXPECT_THAT(r.run.out, HasSubstr("[  FAILED  ] 3 tests")) << r.all;
  }
}

// Broken programs on MPI's communicator, under mpirun: a split
// communicator's ranks that reduce different counts, an isend left in
// flight, a Request dropped without wait(), a collective assertion of values
// that differ in the last bit. Each fails, naming what is wrong.
TEST_F(MpiTest, BackendMpiFailsEveryBrokenProgram) {
  Report r = RunMpiChild(Mpirun(),
                         "MpiBackend.SplitCommunicatorsThatDiffer/*:"
                         "MpiBackend.IsendLeftInFlight/*:"
                         "MpiBackend.RequestDroppedWithoutWait/*:"
                         "MpiBackend.AssertionOfValuesThatDifferInTheLastBit/*",
                         {}, DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(r.run.exit_code, 1) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  FAILED  ] 4 tests")) << r.all;
  EXPECT_THAT(r.run.out, Not(HasSubstr("[       OK ]"))) << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("allreduce of 4 float32 (sum) failed: collective #0 "
                        "does not match across the 2 ranks"))
      << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("collective #0 on world split 0 (color 0) "
                                   "does not match across the ranks"))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 0/2] isend(1 x int32 to rank 1, tag 5) on "
                        "world made here was never waited for"))
      << r.all;
  EXPECT_THAT(r.run.out,
              HasSubstr("[rank 0/2] the Request of isend(1 x int32 to rank 1, "
                        "tag 7) on world made here was destroyed without "
                        "wait()"))
      << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("DIST_EXPECT_ALL_EQ(x): the 2 ranks "
                                   "disagree:\n  0.1: rank 0\n  "
                                   "0.10000000000000002: rank 1"))
      << r.all;
  // Each at its own line.
  for (const char* marker :
       {"marker-in-flight", "marker-dropped", "marker-last-bit"}) {
    EXPECT_THAT(r.run.out,
                HasSubstr(fmt::format(
                    "mpi_backend_child_.cc:{}: Failure",
                    LineIn(DISTTEST_MPI_BACKEND_CHILD_SOURCE, marker))))
        << marker << "\n"
        << r.all;
  }
}

// A collective that rank 0 gave up (a short timeout it expects): its
// communicator refuses every later operation, saying why, instead of
// pairing MPI's pending call with a later one; the next test runs on new
// communicators on every rank.
TEST_F(MpiTest, BackendMpiGivenUpCollectiveIsNeverPairedWithALaterOne) {
  Report r =
      RunMpiChild(Mpirun(), "MpiBackend.AGivenUp*:MpiBackend.AfterTheGivenUp*",
                  {}, DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(r.run.exit_code, 0) << r.all;
  EXPECT_THAT(r.run.out, HasSubstr("[  PASSED  ] 2 tests.")) << r.all;
  EXPECT_THAT(r.run.err,
              HasSubstr("marker-refused [rank 0/2] barrier failed: this "
                        "communicator gave up an operation before (timed out "
                        "after 300 ms)"))
      << r.all;
}

// A rank that never joins a collective, and passes: its peer's MPI wait is
// cut four heartbeats later, saying why, not at the timeout, and the report
// names the collective and the line each rank waits at, as on every
// backend; a rank that fails and leaves while its peer waits cuts the
// peer's MPI wait after the failure grace, saying why.
TEST_F(MpiTest, BackendMpiHangAndEarlyFailureSayWhereEachRankIs) {
  Report hung = RunMpiChild(Mpirun(), "MpiBackendShort.*", {},
                            DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(hung.run.exit_code, 1) << hung.all;
  EXPECT_THAT(hung.run.out,
              HasSubstr(fmt::format(
                  "collective #1 on the world communicator never completed:\n"
                  "  rank 0 failed in allreduce(8 x float32, sum) at "
                  "mpi_backend_child_.cc:{} after ",
                  LineIn(DISTTEST_MPI_BACKEND_CHILD_SOURCE, "marker-hang"))))
      << hung.all;
  EXPECT_THAT(hung.run.out, HasSubstr("  rank 1 is not in it: its last "
                                      "collective, #0 barrier() (disttest's, "
                                      "before the body)"))
      << hung.all;
  EXPECT_THAT(hung.run.out,
              HasSubstr("allreduce of 8 float32 (sum) failed: disttest cut "
                        "the communicators: rank 1 passed the test and left it "
                        "(its last collective there was #0) while this rank "
                        "waited in allreduce(8 x float32, sum) (collective #1 "
                        "on the world communicator), which needs all 2 ranks: "
                        "it can never complete"))
      << hung.all;

  Report left = RunMpiChild(Mpirun(), "MpiBackend.Rank1FailsWhileRank0Waits/*",
                            {}, DISTTEST_MPI_BACKEND_CHILD);
  EXPECT_EQ(left.run.exit_code, 1) << left.all;
  EXPECT_THAT(left.run.out,
              HasSubstr("[rank 0/2] the test body threw disttest::CommError: "
                        "[rank 0/2] allreduce of 8 float32 (sum) failed: "
                        "disttest cut the communicators: rank 1 failed the "
                        "test and left it, and this rank was still in it "))
      << left.all;
  EXPECT_THAT(left.run.out, Not(HasSubstr("timed out"))) << left.all;
}

}  // namespace
}  // namespace disttest::testing
