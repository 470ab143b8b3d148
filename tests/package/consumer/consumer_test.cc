// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include <disttest/disttest.h>

class Consumer : public disttest::DistributedTest {};

DIST_TEST_F(Consumer, SumsRanks, 2) {
  int v = rank() + 1;
  comm().allreduce(&v, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(v, 3);
}
