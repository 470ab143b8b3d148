// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 1: a collective's correctness over world sizes and message sizes.
//
// The sizes after the test name make one gtest test per world size
// ("SumsEveryElement/4ranks"); the body loops over message sizes. Count the
// wrong elements instead of asserting on each one: an ASSERT that returns
// on one rank leaves the others alone in the next collective.
#include <disttest/disttest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

class Allreduce : public disttest::DistributedTest {};

DIST_TEST_F(Allreduce, SumsEveryElement, 1, 2, 3, 4, 8) {
  const std::int64_t n = world_size();
  for (std::size_t count : {1u, 7u, 1024u, 65536u}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<std::int64_t> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = rank() * 1000 + i;
    comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
      // sum over r of (1000 r + i)
      const std::int64_t want = 1000 * n * (n - 1) / 2 + n * i;
      if (v[i] != want) ++wrong;
    }
    EXPECT_EQ(wrong, 0u);
  }
}

DIST_TEST_F(Allreduce, MinAndMaxPickTheExtremeRanks, 2, 4) {
  double lo = rank(), hi = rank();
  comm().allreduce(&lo, 1, disttest::ReduceOp::kMin);
  comm().allreduce(&hi, 1, disttest::ReduceOp::kMax);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, world_size() - 1);
}

}  // namespace
