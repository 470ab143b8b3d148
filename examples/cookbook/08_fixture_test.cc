// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 8: a distributed set-up at another world size.
//
// A checkpoint written by 2 ranks must load on 1, 3 and 4. The
// DistributedFixture runs its Run() in its own 2 ranks before each test;
// dir() is a temporary directory that the fixture's ranks and the test's
// ranks share, removed when the test ends. A failure in the fixture fails
// the test ("[SavedCheckpoint rank 1/2] ...") without running its body.
#include <disttest/disttest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr int kParams = 1000;

float Weight(int i) { return 0.5f * static_cast<float>(i); }

// [begin, end) of the parameters that `rank` of `world` owns.
std::pair<int, int> Slice(int rank, int world) {
  const int per = (kParams + world - 1) / world;
  return {std::min(kParams, rank * per), std::min(kParams, (rank + 1) * per)};
}

class SavedCheckpoint : public disttest::DistributedFixture {
 public:
  SavedCheckpoint() : DistributedFixture(/*world_size=*/2) {}

  void Run() override {
    auto [begin, end] = Slice(rank(), world_size());
    std::ofstream out(dir() / ("shard-" + std::to_string(rank())),
                      std::ios::binary);
    for (int i = begin; i < end; ++i) {
      float w = Weight(i);
      out.write(reinterpret_cast<const char*>(&w), sizeof w);
    }
    ASSERT_TRUE(out.good()) << "cannot write to " << dir();
    out.close();
    comm().barrier();  // every shard is on disk before any rank reports
  }
};

class Resharding : public disttest::DistributedTest {
 protected:
  SavedCheckpoint& checkpoint_ = UseFixture<SavedCheckpoint>();

  std::vector<float> LoadAll() const {
    std::vector<float> all;
    for (int r = 0; r < checkpoint_.world_size(); ++r) {
      std::ifstream in(checkpoint_.dir() / ("shard-" + std::to_string(r)),
                       std::ios::binary);
      for (float w; in.read(reinterpret_cast<char*>(&w), sizeof w);) {
        all.push_back(w);
      }
    }
    return all;
  }
};

DIST_TEST_F(Resharding, LoadsATwoRankCheckpoint, 1, 3, 4) {
  const std::vector<float> all = LoadAll();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kParams));
  auto [begin, end] = Slice(rank(), world_size());
  int wrong = 0;
  for (int i = begin; i < end; ++i) wrong += all[i] != Weight(i) ? 1 : 0;
  EXPECT_EQ(wrong, 0);
  int owned = end - begin;
  comm().allreduce(&owned, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(owned, kParams);
}

}  // namespace
