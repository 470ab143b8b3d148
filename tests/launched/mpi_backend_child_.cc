// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Run by mpi_comm_test.cc under `mpirun -np 4` and in a plain run (mpiexec
// starts the ranks): tests whose communicator is MPI's (Backend::kMpi).
#include <disttest/disttest.h>
#include <disttest/mpi.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "support/edge_reductions.h"

namespace {

using disttest::ReduceOp;

class MpiBackend : public disttest::DistributedTest {
 protected:
  MpiBackend() { options().backend = disttest::Backend::kMpi; }
};

// Every operation against what a serial program computes.
DIST_TEST_F(MpiBackend, CollectivesMatchASerialReference, 1, 2, 4) {
  disttest::Communicator& c = comm();
  ASSERT_STREQ(c.backend_name(), "mpi");
  const int n = world_size();
  const int me = rank();
  std::vector<float> f(5, float(me + 1));
  c.allreduce(f.data(), f.size(), ReduceOp::kSum);
  EXPECT_EQ(f[4], float(n * (n + 1) / 2));
  std::vector<double> avg{double(me)};
  c.allreduce(avg.data(), 1, ReduceOp::kAvg);
  EXPECT_DOUBLE_EQ(avg[0], (n - 1) / 2.0);
  std::vector<int> most{me * 10};
  c.allreduce(most.data(), 1, ReduceOp::kMax);
  EXPECT_EQ(most[0], (n - 1) * 10);
  std::vector<disttest::float16> half(3, disttest::float16(1.5f));
  c.allreduce(half.data(), half.size(), ReduceOp::kSum);
  EXPECT_EQ(float(half[2]), 1.5f * n);
  bool any = me == n - 1;
  c.allreduce(&any, 1, ReduceOp::kMax);
  EXPECT_TRUE(any);
  // As every backend computes them, where Open MPI's own ops do not.
  disttest::testing::CheckEdgeReductions(c);

  std::vector<std::int64_t> b(3, me == 0 ? 77 : -1);
  c.broadcast(b.data(), b.size(), 0);
  EXPECT_EQ(b, std::vector<std::int64_t>(3, 77));

  std::vector<int> all(2 * n);
  const int pair[2] = {me, -me};
  c.allgather(pair, all.data(), 2);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[2 * q + 1], -q);

  int sum = 0;
  const int one = me + 1;
  c.reduce(&one, &sum, 1, ReduceOp::kSum, n - 1);
  if (me == n - 1) {
    EXPECT_EQ(sum, n * (n + 1) / 2);
  }

  std::vector<int> parts(n);
  std::iota(parts.begin(), parts.end(), 0);  // Part q is q.
  int mine = 0;
  c.reduce_scatter(parts.data(), &mine, 1, ReduceOp::kSum);
  EXPECT_EQ(mine, me * n);

  std::vector<int> gathered(n);
  c.gather(&me, gathered.data(), 1, 0);
  if (me == 0) {
    EXPECT_EQ(gathered, parts);
  }
  int scattered = -1;
  c.scatter(parts.data(), &scattered, 1, 0);
  EXPECT_EQ(scattered, me);

  std::vector<int> to(n, me), from(n, -1);
  c.alltoall(to.data(), from.data(), 1);
  EXPECT_EQ(from, parts);

  // Rank q gives q + 1 elements of value q.
  std::vector<std::size_t> counts(n);
  for (int q = 0; q < n; ++q) counts[q] = q + 1;
  std::vector<int> in(me + 1, me), out(n * (n + 1) / 2);
  c.allgatherv(in.data(), out.data(), counts);
  EXPECT_EQ(out.back(), n - 1);

  // Rank r sends r + 1 elements to each rank.
  std::vector<std::size_t> sends(n, me + 1), expects(n);
  for (int q = 0; q < n; ++q) expects[q] = q + 1;
  std::vector<int> vin(n * (me + 1), me), vout(n * (n + 1) / 2, -1);
  c.alltoallv(vin.data(), sends, vout.data(), expects);
  EXPECT_EQ(vout.front(), 0);
  EXPECT_EQ(vout.back(), n - 1);

  if (n > 1) {
    // A ring of sends; two receives of one peer and tag, waited for in the
    // other order, still take the messages in the order they were sent.
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    int first = -1, second = -1;
    disttest::Request r1 = c.irecv(&first, 1, prev, 5);
    disttest::Request r2 = c.irecv(&second, 1, prev, 5);
    const int a = me * 100 + 1, z = me * 100 + 2;
    disttest::Request s1 = c.isend(&a, 1, next, 5);
    disttest::Request s2 = c.isend(&z, 1, next, 5);
    r2.wait();
    r1.wait();
    s1.wait();
    s2.wait();
    EXPECT_EQ(first, prev * 100 + 1);
    EXPECT_EQ(second, prev * 100 + 2);
    if (me % 2 == 0) {
      c.send(&me, 1, next, 9);
      c.recv(&first, 1, prev, 9);
    } else {
      c.recv(&first, 1, prev, 9);
      c.send(&me, 1, next, 9);
    }
    EXPECT_EQ(first, prev);
  }

  if (n > 1) {
    // A receive posted on one communicator takes its message while the rank
    // waits on another: the sender's blocking send there returns (as in
    // MPI), and then its send here.
    std::unique_ptr<disttest::Communicator> other = c.split(0);
    const int peer = me ^ 1;  // Pairs 0-1, 2-3.
    int there = -1, here = -1;
    if (me % 2 == 0) {
      disttest::Request posted = other->irecv(&there, 1, peer, 4);
      c.recv(&here, 1, peer, 4);
      posted.wait();
    } else {
      other->send(&me, 1, peer, 4);
      c.send(&me, 1, peer, 4);
      there = here = peer;
    }
    EXPECT_EQ(there, peer);
    EXPECT_EQ(here, peer);
  }

  // Split by parity; the MPI code's own communicator alongside.
  std::unique_ptr<disttest::Communicator> half_world = c.split(me % 2);
  int in_half = 1;
  half_world->allreduce(&in_half, 1, ReduceOp::kSum);
  EXPECT_EQ(in_half, half_world->size());
  int of_mpi = 1, total = 0;
  MPI_Allreduce(&of_mpi, &total, 1, MPI_INT, MPI_SUM, disttest::mpi_comm());
  EXPECT_EQ(total, n);
  c.barrier();
  std::fprintf(stderr, "marker-mpi-backend rank %d of %d\n", me, n);
}

// launch()'s groups follow the world's backend: MPI's too.
class MpiBackendGroups : public MpiBackend {
 protected:
  MpiBackendGroups() {
    options().parallel = disttest::ParallelConfig{.tensor = 2};
  }
};

DIST_TEST_F(MpiBackendGroups, TensorGroupsAreMpis, 4) {
  disttest::Communicator& tensor = ctx().group(disttest::ParallelMode::kTensor);
  EXPECT_STREQ(tensor.backend_name(), "mpi");
  int pair = rank();
  tensor.allreduce(&pair, 1, ReduceOp::kSum);
  EXPECT_EQ(pair, rank() / 2 * 4 + 1);  // Ranks 2k and 2k + 1.
}

// Rank 1 reduces 4 elements, the others 8: every rank fails at once, naming
// each rank's call, and no rank's buffer is touched.
DIST_TEST_F(MpiBackend, CountsDifferOnRank1, 2, 3) {
  std::vector<float> v(8, 1.0f);
  try {
    comm().allreduce(v.data(), rank() == 1 ? 4 : 8, ReduceOp::kSum);
  } catch (const disttest::CommError& e) {
    EXPECT_EQ(v, std::vector<float>(8, 1.0f)) << "the buffer was used";
    throw;
  }
}

// Rank 1 receives 4 int32 where rank 0 sent 8: rank 1 fails, naming both,
// and its buffer is untouched.
DIST_TEST_F(MpiBackend, RecvExpectsAnotherCount, 2) {
  std::vector<int> v(8, rank());
  if (rank() == 0) {
    comm().send(v.data(), 8, 1, 3);
  } else {
    try {
      comm().recv(v.data(), 4, 0, 3);
    } catch (const disttest::CommError&) {
      EXPECT_EQ(v, std::vector<int>(8, 1)) << "the buffer was used";
      throw;
    }
  }
}

// Rank 0 gives up an allreduce that rank 1 never joins (a short timeout it
// expects): MPI may still complete it, so the communicator refuses every
// later operation, saying why, rather than pair it with the wrong call.
DIST_TEST_F(MpiBackend, AGivenUpCollectiveLeavesTheCommunicatorRefusing, 2) {
  if (rank() != 0) return;
  float x = 1;
  {
    disttest::ScopedTimeout quick(comm(), std::chrono::milliseconds(300));
    EXPECT_THROW(comm().allreduce(&x, 1, ReduceOp::kSum), disttest::CommError);
  }
  try {
    comm().barrier();
    ADD_FAILURE() << "the barrier after the given-up allreduce ran";
  } catch (const disttest::CommError& e) {
    std::fprintf(stderr, "marker-refused %s\n", e.what());
  }
}

// The test after it: every rank has a new communicator (one failed on rank
// 0 in the test before), and its collectives pair up.
DIST_TEST_F(MpiBackend, AfterTheGivenUpCollectiveRunsOnANewCommunicator, 2) {
  float x = 1;
  comm().allreduce(&x, 1, ReduceOp::kSum);
  EXPECT_EQ(x, 2.0f);
}

class MpiBackendShort : public MpiBackend {
 protected:
  MpiBackendShort() { options().timeout = std::chrono::seconds(3); }
};

// Rank 1 never joins rank 0's allreduce: the test times out, saying where
// rank 0 waits.
DIST_TEST_F(MpiBackendShort, Rank1SkipsTheAllreduce, 2) {
  std::vector<float> v(8, 1.0f);
  if (rank() == 0) {
    comm().allreduce(v.data(), v.size(), ReduceOp::kSum);  // marker-hang
  }
}

// Rank 1 fails before the allreduce that rank 0 waits in: rank 0's wait is
// cut after the failure grace (not at the timeout), saying why.
DIST_TEST_F(MpiBackend, Rank1FailsWhileRank0Waits, 2) {
  ASSERT_NE(rank(), 1) << "marker-fails-first";
  std::vector<float> v(8, 1.0f);
  comm().allreduce(v.data(), v.size(), ReduceOp::kSum);
}

// --- Broken programs on MPI's communicator: each must fail. ---

// A split communicator whose ranks reduce different counts.
DIST_TEST_F(MpiBackend, SplitCommunicatorsThatDiffer, 2) {
  std::unique_ptr<disttest::Communicator> all = comm().split(0, rank());
  std::vector<float> v(8, 1.0f);
  all->allreduce(v.data(), rank() == 1 ? 4 : 8, ReduceOp::kSum);
}

// Rank 0's isend that nobody receives, kept past the test: the account at
// the test's end fails it (MPI_Issend cannot complete unreceived).
DIST_TEST_F(MpiBackend, IsendLeftInFlight, 2) {
  static int x = 1234;
  if (rank() == 0) {
    static auto* kept =
        new disttest::Request(comm().isend(&x, 1, 1, 5));  // marker-in-flight
    (void)kept;
  }
}

// A Request dropped without wait(): its destructor's wait fails the test.
DIST_TEST_F(MpiBackend, RequestDroppedWithoutWait, 2) {
  disttest::ScopedTimeout quick(comm(), std::chrono::milliseconds(500));
  int x = 1234;
  if (rank() == 0) {
    disttest::Request r = comm().isend(&x, 1, 1, 7);  // marker-dropped
  }
}

// A collective assertion over values that differ in the last bit: compared
// as values through MPI, not as printed text.
DIST_TEST_F(MpiBackend, AssertionOfValuesThatDifferInTheLastBit, 2) {
  double x = 0.1;
  if (rank() == 1) x = std::nextafter(x, 1.0);
  DIST_EXPECT_ALL_EQ(x);  // marker-last-bit
}

}  // namespace
