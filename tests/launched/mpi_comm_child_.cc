// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Run by mpi_comm_test.cc under `mpirun -np 4`, under another launcher and
// alone: tests whose bodies use disttest::mpi_comm().
#include <disttest/disttest.h>
#include <disttest/mpi.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

class Mpi : public disttest::DistributedTest {};

// Exactly the test's ranks, in rank() order: a 2-rank test under -np 4 has
// a communicator of 2.
DIST_TEST_F(Mpi, CommunicatorHoldsTheTestsRanks, 1, 2, 4) {
  MPI_Comm comm = disttest::mpi_comm();
  int size = 0;
  int me = -1;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &me);
  EXPECT_EQ(size, world_size());
  EXPECT_EQ(me, rank());
  int mine = me + 1;
  int sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(sum, world_size() * (world_size() + 1) / 2);
  EXPECT_EQ(disttest::mpi_comm(), comm);  // One a test.
  std::fprintf(stderr, "marker-mpi rank %d of %d\n", me, size);
}

// Rank 0 sends a message that no rank receives; the next test's
// communicator is another: it never sees it.
DIST_TEST_F(Mpi, LeavesAMessageUnreceived, 2) {
  MPI_Comm comm = disttest::mpi_comm();
  if (rank() == 0) {
    int value = 42;
    MPI_Send(&value, 1, MPI_INT, 1, 7, comm);
  }
  MPI_Barrier(comm);
}

DIST_TEST_F(Mpi, SeesNoMessageOfTheTestBefore, 2) {
  MPI_Comm comm = disttest::mpi_comm();
  MPI_Barrier(comm);
  if (rank() == 1) {
    int waiting = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &waiting, MPI_STATUS_IGNORE);
    EXPECT_EQ(waiting, 0) << "a message of the test before arrived";
  }
}

DIST_TEST_F(Mpi, FailsOnRank1, 2) {
  int value = rank() == 0 ? 7 : 0;
  MPI_Bcast(&value, 1, MPI_INT, 0, disttest::mpi_comm());
  EXPECT_EQ(value, 7);
  EXPECT_NE(rank(), 1) << "marker-mpi-fail";
}

DIST_TEST_F(Mpi, CrashesOnRank1, 2) {
  MPI_Barrier(disttest::mpi_comm());
  if (rank() == 1) std::raise(SIGSEGV);  // marker-mpi-crash
}

class MpiShort : public Mpi {
 protected:
  MpiShort() { options().timeout = std::chrono::seconds(3); }
};

// Rank 1 waits for a message rank 0 never sends.
DIST_TEST_F(MpiShort, HangsOnRank1, 2) {
  MPI_Comm comm = disttest::mpi_comm();
  if (rank() == 1) {
    int value = 0;
    // marker-mpi-hang: the line below.
    MPI_Recv(&value, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
  }
}

class MpiEnds : public Mpi {};

DIST_TEST_F(MpiEnds, SkipsEverywhere, 2) {
  MPI_Barrier(disttest::mpi_comm());
  GTEST_SKIP() << "marker-mpi-skip";
}

// Passes, but rank 1's process then ends with status 3 (after rank 0 has
// reported the pass).
DIST_TEST_F(MpiEnds, ExitsWithThreeAfterItsPass, 2) {
  MPI_Barrier(disttest::mpi_comm());
  if (rank() == 1) std::atexit([] { _exit(3); });
}

// With MPI_CHILD_SKIP_ALL, the ranks (launched by the parent's mpiexec)
// skip every test in a global SetUp: gtest lists the tests it never ran.
class SkipAllInTheRanks : public ::testing::Environment {
  void SetUp() override {
    const char* launcher = std::getenv("DISTTEST_LAUNCHER");
    if (std::getenv("MPI_CHILD_SKIP_ALL") != nullptr && launcher != nullptr &&
        std::string(launcher) == "launched") {
      GTEST_SKIP() << "marker-global-skip";
    }
  }
};
::testing::Environment* const kSkipAll =
    ::testing::AddGlobalTestEnvironment(new SkipAllInTheRanks);

// A plain gtest test runs in every process, outside any rank.
TEST(MpiOutsideARank, Throws) {
  try {
    disttest::mpi_comm();
    ADD_FAILURE() << "no error";
  } catch (const disttest::Error& e) {
    std::printf("marker-outside %s\n", e.what());
  }
}

}  // namespace
