// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 4: every rank must end up with the same state.
//
// Data-parallel training keeps a replica of the weights on every rank; after
// each step the replicas must be identical. DIST_EXPECT_ALL_EQ compares one
// value across ranks and, when they differ, prints on every rank a table of
// which ranks hold which value. DIST_ASSERT_ALL_TRUE stops the body on every
// rank together, so no rank waits in a later collective for one that left.
#include <disttest/disttest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

std::uint64_t Checksum(const std::vector<float>& w) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  for (float x : w) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

class DataParallel : public disttest::DistributedTest {};

DIST_TEST_F(DataParallel, ReplicasStayIdenticalAfterAStep, 2, 4) {
  std::mt19937 same_everywhere(1234);
  std::uniform_real_distribution<float> init(-1.0f, 1.0f);
  std::vector<float> w(256);
  for (float& x : w) x = init(same_everywhere);

  // Each rank's gradient comes from its own data; the mean is shared.
  std::vector<float> grad(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) grad[i] = (rank() + 1) * w[i];
  comm().allreduce(grad.data(), grad.size(), disttest::ReduceOp::kSum);
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] -= 0.01f * grad[i] / static_cast<float>(world_size());
  }

  DIST_ASSERT_ALL_TRUE(std::isfinite(w[0]));
  DIST_EXPECT_ALL_EQ(Checksum(w));
}

}  // namespace
