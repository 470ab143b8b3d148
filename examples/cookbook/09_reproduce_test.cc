// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 9: a failure on one rank that can be reproduced.
//
// Derive each rank's input from (seed, rank) and put both into every
// failure with SCOPED_TRACE. A failure then reads
//   [rank 2/4] Expected equality ... Google Test trace: seed 7, rank 2
// and the parent prints the command that reruns just this test. Rerun it
// with COOKBOOK_SEED set to the seed, and, to step through the failing rank:
//   DISTTEST_DEBUG_RANK=2 <rerun command>   # rank 2 waits for gdb -p <pid>
//   DISTTEST_LOG_DIR=logs <rerun command>   # each rank's whole output
// DISABLED_ShowsARankSpecificFailure fails on purpose; run it with
//   --gtest_also_run_disabled_tests --gtest_filter='*ShowsARankSpecific*'
#include <disttest/disttest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

unsigned Seed() {
  const char* seed = std::getenv("COOKBOOK_SEED");
  return seed != nullptr
             ? static_cast<unsigned>(std::strtoul(seed, nullptr, 10))
             : 7u;
}

class Reproducible : public disttest::DistributedTest {
 protected:
  std::vector<int> RankInput(int n) const {
    std::mt19937 gen(Seed() * 1000 + static_cast<unsigned>(rank()));
    std::uniform_int_distribution<int> value(0, 1000);
    std::vector<int> v(n);
    for (int& x : v) x = value(gen);
    return v;
  }
};

DIST_TEST_F(Reproducible, GlobalMaxIsEveryonesMax, 4) {
  SCOPED_TRACE("seed " + std::to_string(Seed()) + ", rank " +
               std::to_string(rank()));
  const std::vector<int> mine = RankInput(64);
  int local = *std::max_element(mine.begin(), mine.end());
  int global = local;
  comm().allreduce(&global, 1, disttest::ReduceOp::kMax);
  EXPECT_GE(global, local);
}

// The size of `rank`'s shard of `total` items; wrong on purpose: it forgets
// the remainder, which belongs to the last rank.
int BuggyShardSize(int total, int /*rank*/, int world) { return total / world; }

DIST_TEST_F(Reproducible, DISABLED_ShowsARankSpecificFailure, 4) {
  SCOPED_TRACE("seed " + std::to_string(Seed()) + ", rank " +
               std::to_string(rank()));
  const int total = 10 + static_cast<int>(Seed() % 3);
  const int per = total / world_size();
  const int begin = rank() * per;
  const int end = rank() == world_size() - 1 ? total : begin + per;
  EXPECT_EQ(BuggyShardSize(total, rank(), world_size()), end - begin)
      << "items [" << begin << ", " << end << ") of " << total;
  comm().barrier();
}

}  // namespace
