// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Unit tests of MPI code: each DIST_TEST_F gets an MPI communicator of
// exactly its ranks, disttest::mpi_comm(), when the binary runs under an MPI
// launcher:
//
//   mpirun -np 4 ./mpi_test     # the 2-rank tests run on ranks 0-1 of 4
//   DISTTEST_LAUNCH=mpiexec ./mpi_test   # mpiexec starts each test's ranks
//
// Rank 0 reports every test once, failures labelled by rank. Link
// disttest::mpi (built where CMake finds MPI). With Backend::kMpi
// (MpiEverywhere below) comm() is MPI's as well.
#include <disttest/disttest.h>
#include <disttest/mpi.h>

#include <vector>

namespace {

// The code under test: each rank passes its block to the next rank of the
// ring and gets the block of the one before.
std::vector<double> ShiftRight(const std::vector<double>& block,
                               MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<double> received(block.size());
  const int n = static_cast<int>(block.size());
  MPI_Sendrecv(block.data(), n, MPI_DOUBLE, (rank + 1) % size, 0,
               received.data(), n, MPI_DOUBLE, (rank + size - 1) % size, 0,
               comm, MPI_STATUS_IGNORE);
  return received;
}

// And a dot product of vectors distributed over the ranks.
double Dot(const std::vector<double>& a, const std::vector<double>& b,
           MPI_Comm comm) {
  double local = 0;
  for (std::size_t i = 0; i < a.size(); ++i) local += a[i] * b[i];
  double global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm);
  return global;
}

class MpiRing : public disttest::DistributedTest {};

DIST_TEST_F(MpiRing, ShiftPassesEachBlockToTheNextRank, 2, 4) {
  const std::vector<double> mine(3, rank());
  const std::vector<double> got = ShiftRight(mine, disttest::mpi_comm());
  const int before = (rank() + world_size() - 1) % world_size();
  EXPECT_EQ(got, std::vector<double>(3, before));
}

DIST_TEST_F(MpiRing, DotProductIsTheSameOnEveryRank, 1, 2, 4) {
  const std::vector<double> ones(4, 1.0);
  const std::vector<double> mine(4, rank() + 1.0);
  const double dot = Dot(ones, mine, disttest::mpi_comm());
  EXPECT_EQ(dot, 4.0 * world_size() * (world_size() + 1) / 2);
  DIST_EXPECT_ALL_EQ(dot);  // Over disttest's own communicator.
}

// Backend::kMpi: disttest's own communicator (comm(), and the collective
// assertions over it) is MPI's too, for code that uses both. Calls that
// differ across the ranks fail before their data is used; a hang names the
// collective each rank waits in. In a plain run, mpiexec starts its ranks
// (no DISTTEST_LAUNCH needed).
class MpiEverywhere : public disttest::DistributedTest {
 protected:
  MpiEverywhere() { options().backend = disttest::Backend::kMpi; }
};

DIST_TEST_F(MpiEverywhere, ShiftAgreesWithAnAllgather, 2, 4) {
  const std::vector<double> mine(3, rank());
  const std::vector<double> got = ShiftRight(mine, disttest::mpi_comm());
  std::vector<double> all(mine.size() * world_size());
  comm().allgather(mine.data(), all.data(), mine.size());  // MPI_Iallgather
  const int before = (rank() + world_size() - 1) % world_size();
  EXPECT_EQ(got[0], all[mine.size() * before]);
  DIST_EXPECT_ALL_EQ(all);
}

}  // namespace
