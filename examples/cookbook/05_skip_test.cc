// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 5: skipping.
//
// - A requirement the parent can check (cores, a file, a variable): skip in
//   SetUp(), which runs in the parent, and no rank is started.
// - A requirement only a rank can check: GTEST_SKIP() in the body. When every
//   rank skips, the test is skipped; when only some do, the test fails by
//   default ("rank 1 of 2 skipped ... while the other ranks ran"), because a
//   rank that skips leaves its peers alone in their next collective.
// - Ranks that legitimately skip alone: SkipPolicy::kAllowPartial, and no
//   collective after the skip.
#include <disttest/disttest.h>

#include <cstdlib>
#include <thread>

namespace {

class NeedsCores : public disttest::DistributedTest {
 protected:
  void SetUp() override {
    const unsigned cores = std::thread::hardware_concurrency();
    if (cores * 4 < static_cast<unsigned>(world_size())) {
      GTEST_SKIP() << world_size() << " ranks on " << cores
                   << " cores would only measure the scheduler";
    }
  }
};

// On a 2-core runner the 64-rank test is skipped before any rank exists.
DIST_TEST_F(NeedsCores, BarrierAtScale, 4, 64) { comm().barrier(); }

class OptionalData : public disttest::DistributedTest {};

DIST_TEST_F(OptionalData, SkipsOnEveryRankTogether) {
  // The same answer on every rank, so every rank skips (or none does).
  if (std::getenv("COOKBOOK_DATA_DIR") == nullptr) {
    GTEST_SKIP() << "set COOKBOOK_DATA_DIR to run this test";
  }
  comm().barrier();
}

class Replicas : public disttest::DistributedTest {
 protected:
  Replicas() { options().skip_policy = disttest::SkipPolicy::kAllowPartial; }
};

DIST_TEST_F(Replicas, OnlyRanksWithAReplicaCheckIt, 4) {
  comm().barrier();  // every collective comes before the skip
  if (rank() % 2 == 1) GTEST_SKIP() << "odd ranks hold no replica";
  EXPECT_EQ(rank() % 2, 0);
}

}  // namespace
