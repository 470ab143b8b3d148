// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 2: rank-specific data checked against a serial reference.
//
// Each rank loads its own shard in SetUpRank() (which runs in every rank,
// before the body) and the distributed result is compared with what one
// process computes from the whole dataset. Every rank can compute the
// reference itself, so no rank has to be special.
#include <disttest/disttest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace {

std::vector<std::int64_t> Dataset() {
  std::vector<std::int64_t> data(101);
  std::iota(data.begin(), data.end(), 1);  // 1..101
  return data;
}

class ShardedSum : public disttest::DistributedTest {
 protected:
  // Contiguous shards; the first (size % world) ranks get one more element.
  void SetUpRank() override {
    const std::vector<std::int64_t> all = Dataset();
    const int n = world_size();
    const int base = static_cast<int>(all.size()) / n;
    const int extra = static_cast<int>(all.size()) % n;
    const int begin = rank() * base + std::min(rank(), extra);
    const int size = base + (rank() < extra ? 1 : 0);
    shard_.assign(all.begin() + begin, all.begin() + begin + size);
  }

  std::vector<std::int64_t> shard_;
};

DIST_TEST_F(ShardedSum, MatchesTheSerialSum, 1, 2, 3, 4) {
  const std::vector<std::int64_t> all = Dataset();
  const std::int64_t serial = std::accumulate(all.begin(), all.end(), 0LL);

  std::int64_t sum = std::accumulate(shard_.begin(), shard_.end(), 0LL);
  comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, serial);

  // Every element is in exactly one shard, and the shards are balanced.
  std::int64_t mine = static_cast<std::int64_t>(shard_.size());
  std::vector<std::int64_t> sizes(world_size());
  comm().allgather(&mine, sizes.data(), 1);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0LL),
            static_cast<std::int64_t>(all.size()));
  auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
  EXPECT_LE(*hi - *lo, 1);
}

}  // namespace
