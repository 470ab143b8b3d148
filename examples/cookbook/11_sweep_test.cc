// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 11: a sweep in gtest's own grammar.
//
// DIST_TEST_P is TEST_P with world sizes: one gtest test per parameter and
// world size, instantiated by gtest's INSTANTIATE_TEST_SUITE_P, so a wrong
// result at one message size fails that test alone and the filter picks
// it: --gtest_filter='Counts/AllreduceSweep.SumsEveryElement/4ranks/1024'.
// GetParam() is the same in every rank.
#include <disttest/disttest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

class AllreduceSweep : public disttest::DistributedTestWithParam<std::size_t> {
};

DIST_TEST_P(AllreduceSweep, SumsEveryElement, 2, 4) {
  const std::size_t count = GetParam();
  const std::int64_t n = world_size();
  std::vector<std::int64_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = rank() * 1000 + i;
  comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (v[i] != 1000 * n * (n - 1) / 2 + n * static_cast<std::int64_t>(i)) {
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// Tests named by their counts, "Counts/AllreduceSweep.SumsEveryElement/
// 2ranks/65536" (gtest's default names are the parameter's index).
INSTANTIATE_TEST_SUITE_P(Counts, AllreduceSweep,
                         ::testing::Values(0, 1, 7, 1024, 65536),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
