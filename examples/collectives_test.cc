// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The example suite: CPU collectives over Gloo at world sizes 1, 2 and 4, in
// both launch modes. Run it as any gtest binary:
//
//   ./build/examples/collectives_test
//   ./build/examples/collectives_test --gtest_filter='*AllReduce*/4ranks'
//
// DISABLED_RankSpecificFailure shows what a failure on one rank looks like;
// it is kept out of the default run:
//
//   ./build/examples/collectives_test --gtest_also_run_disabled_tests
//       --gtest_filter='*RankSpecificFailure*'
#include <disttest/disttest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace {

// Forked ranks: the default, and the fastest.
class Collectives : public disttest::DistributedTest {};

// The same tests with re-executed ranks (LaunchMode::kExec).
class CollectivesExec : public disttest::DistributedTest {
 protected:
  CollectivesExec() { options().launch = disttest::LaunchMode::kExec; }
};

template <typename T>
void CheckAllReduce(disttest::Communicator& comm) {
  const int n = comm.size();
  std::vector<T> v(8, static_cast<T>(comm.rank() + 1));
  comm.allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
  for (T x : v) EXPECT_EQ(x, static_cast<T>(n * (n + 1) / 2));

  std::vector<T> hi(3, static_cast<T>(comm.rank()));
  comm.allreduce(hi.data(), hi.size(), disttest::ReduceOp::kMax);
  EXPECT_EQ(hi[0], static_cast<T>(n - 1));
  std::vector<T> lo(3, static_cast<T>(comm.rank() + 2));
  comm.allreduce(lo.data(), lo.size(), disttest::ReduceOp::kMin);
  EXPECT_EQ(lo[2], static_cast<T>(2));
  std::vector<T> prod(2, static_cast<T>(2));
  comm.allreduce(prod.data(), prod.size(), disttest::ReduceOp::kProd);
  EXPECT_EQ(prod[1], static_cast<T>(1 << n));
}

DIST_TEST_F(Collectives, AllReduce, 1, 2, 4) {
  CheckAllReduce<float>(comm());
  CheckAllReduce<double>(comm());
  CheckAllReduce<std::int32_t>(comm());
  CheckAllReduce<std::int64_t>(comm());
}

DIST_TEST_F(Collectives, BroadcastFromLastRank, 1, 2, 4) {
  const int root = world_size() - 1;
  std::vector<int> v(4, rank() == root ? 7 : -1);
  comm().broadcast(v.data(), v.size(), root);
  EXPECT_EQ(v, std::vector<int>(4, 7));
}

DIST_TEST_F(Collectives, AllGather, 1, 2, 4) {
  std::vector<std::int64_t> mine = {rank(), 10 * rank()};
  std::vector<std::int64_t> all(2 * world_size());
  comm().allgather(mine.data(), all.data(), mine.size());
  for (int r = 0; r < world_size(); ++r) {
    EXPECT_EQ(all[2 * r], r);
    EXPECT_EQ(all[2 * r + 1], 10 * r);
  }
}

DIST_TEST_F(Collectives, RingSendRecv, 2, 4) {
  const int next = (rank() + 1) % world_size();
  const int prev = (rank() + world_size() - 1) % world_size();
  double out = rank() + 0.5, in = -1;
  // Even ranks send first, odd ranks receive first: no rank waits on itself.
  if (rank() % 2 == 0) {
    comm().send(&out, 1, next);
    comm().recv(&in, 1, prev);
  } else {
    comm().recv(&in, 1, prev);
    comm().send(&out, 1, next);
  }
  EXPECT_EQ(in, prev + 0.5);
}

DIST_TEST_F(Collectives, EveryRankHoldsTheSameSum, 2, 4) {
  std::int64_t sum = rank() + 1;
  comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  // A collective assertion: fails on every rank, with a table of who holds
  // what, if any rank disagrees.
  DIST_EXPECT_ALL_EQ(sum);
  DIST_EXPECT_ALL_TRUE(sum == world_size() * (world_size() + 1) / 2);
}

// Each rank is a process with the rank environment set; even under
// DISTTEST_LAUNCH=threads, where ranks are threads sharing one environment.
class RankProcesses : public disttest::DistributedTest {
 protected:
  RankProcesses() { options().process_only = true; }
};

DIST_TEST_F(RankProcesses, RankEnvironment) {  // The default world size, 2.
  EXPECT_EQ(world_size(), 2);
  EXPECT_EQ(local_rank(), rank());
  EXPECT_EQ(std::getenv("RANK"), std::to_string(rank()));
  EXPECT_EQ(std::getenv("WORLD_SIZE"), std::string("2"));
  EXPECT_NE(std::getenv("MASTER_PORT"), nullptr);
}

DIST_TEST_F(CollectivesExec, AllReduce, 1, 2, 4) {
  CheckAllReduce<float>(comm());
  CheckAllReduce<std::int64_t>(comm());
}

DIST_TEST_F(CollectivesExec, BarrierThenBroadcast, 2, 4) {
  comm().barrier();
  int token = rank() == 0 ? 1234 : 0;
  comm().broadcast(&token, 1, 0);
  EXPECT_EQ(token, 1234);
}

// What a rank-specific failure looks like: rank 1 computes a wrong partial
// sum. Run with --gtest_also_run_disabled_tests to see it.
DIST_TEST_F(Collectives, DISABLED_RankSpecificFailure, 2, 4) {
  std::vector<int> partial(4, rank() == 1 ? 100 : 1);
  const int sum = std::accumulate(partial.begin(), partial.end(), 0);
  EXPECT_EQ(sum, 4) << "partial sum of rank " << rank();
  int total = sum;
  comm().allreduce(&total, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(total, 4 * world_size());
}

}  // namespace
