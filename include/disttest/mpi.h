// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MPI for the code under test: the MPI communicator of the calling rank's
// test, exactly the test's ranks in rank() order, for a body run under
// mpirun (or srun --mpi=pmix):
//
//   DIST_TEST_F(Halo, ExchangesWithItsNeighbours, 2, 4) {
//     MPI_Comm comm = disttest::mpi_comm();  // 2 ranks, then 4, of -np 4
//     int size = 0;
//     MPI_Comm_size(comm, &size);            // world_size()
//     ...
//   }
//
// Link disttest::mpi (built where CMake finds MPI). In each rank disttest
// starts MPI when the run starts (MPI_Init_thread, MPI_THREAD_FUNNELED),
// unless the program started it, and ends it at the end of the run. Every
// rank of a test calls mpi_comm(): it is made by all of them, as any
// collective, and a rank that never calls it leaves the others waiting
// until the test's timeout (the hang report shows where). It is freed when
// the test ends: a message a test left unreceived never reaches the next.
// Elsewhere it throws disttest::Error saying why: outside a rank's test, in
// ranks that disttest spawned (a plain ctest run has no MPI job), or where MPI
// and the launcher disagree on the ranks.
#ifndef DISTTEST_MPI_H_
#define DISTTEST_MPI_H_

#include <mpi.h>

namespace disttest {

// The calling rank's test's MPI communicator; throws disttest::Error where
// there is none (above).
MPI_Comm mpi_comm();

}  // namespace disttest

#endif  // DISTTEST_MPI_H_
