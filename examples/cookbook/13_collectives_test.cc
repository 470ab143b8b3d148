// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 13: the collectives real code uses, swept over message sizes.
//
// Each body checks one collective against a serial reference that every
// rank computes for itself; DIST_TEST_P makes one test per count and world
// size, so a wrong result at one size fails that test alone:
//   --gtest_filter='Counts/Reference.AllToAllV/4ranks/65536'
// The operations: reduce_scatter, alltoallv (every pair its own count),
// isend/irecv (every rank to every other, several at once, received in
// another order), split into a communicator per color, and kAvg over
// bfloat16. On the CPU backend and on NCCL alike.
#include <disttest/disttest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace {

// What rank r holds at element i: distinct for every rank and element.
std::int64_t Value(int r, std::size_t i) {
  return static_cast<std::int64_t>((i * 7919 + 13) % 100003) * 16 + r;
}

class Reference : public disttest::DistributedTestWithParam<std::size_t> {};

DIST_TEST_P(Reference, ReduceScatter, 1, 2, 3, 4) {
  const std::size_t count = GetParam();
  const int n = world_size();
  std::vector<std::int64_t> in(count * n), out(count);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = Value(rank(), i);
  comm().reduce_scatter(in.data(), out.data(), count, disttest::ReduceOp::kSum);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t want = 0;
    for (int q = 0; q < n; ++q) want += Value(q, rank() * count + i);
    wrong += out[i] != want;
  }
  EXPECT_EQ(wrong, 0u);
}

DIST_TEST_P(Reference, AllToAllV, 1, 2, 3, 4) {
  const std::size_t base = GetParam();
  const int n = world_size();
  // Rank a sends rank b its own count (some of them 0).
  const auto count = [&](int a, int b) {
    return base * static_cast<std::size_t>(a + 1) /
               static_cast<std::size_t>(n) +
           static_cast<std::size_t>((a + b) % 2);
  };
  std::vector<std::size_t> in_counts(n), out_counts(n);
  std::vector<std::int64_t> in;
  for (int q = 0; q < n; ++q) {
    in_counts[q] = count(rank(), q);
    out_counts[q] = count(q, rank());
    for (std::size_t i = 0; i < in_counts[q]; ++i) {
      in.push_back(Value(rank(), q * 1000003 + i));
    }
  }
  std::vector<std::int64_t> out(
      std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}));
  comm().alltoallv(in.data(), in_counts, out.data(), out_counts);
  std::size_t at = 0, wrong = 0;
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; i < out_counts[q]; ++i, ++at) {
      wrong += out[at] != Value(q, rank() * 1000003 + i);
    }
  }
  EXPECT_EQ(wrong, 0u);
}

DIST_TEST_P(Reference, NonBlockingExchange, 2, 3, 4) {
  const std::size_t count = GetParam();
  const int n = world_size();
  std::vector<std::vector<std::int64_t>> out(n), in(n);
  std::vector<disttest::Request> pending;
  for (int q = 0; q < n; ++q) {
    if (q == rank()) continue;
    out[q].resize(count);
    for (std::size_t i = 0; i < count; ++i) out[q][i] = Value(rank(), q + i);
    pending.push_back(comm().isend(out[q].data(), count, q));
  }
  for (int q = n - 1; q >= 0; --q) {  // Received in the other order.
    if (q == rank()) continue;
    in[q].assign(count, -1);
    pending.push_back(comm().irecv(in[q].data(), count, q));
  }
  for (disttest::Request& r : pending) r.wait();
  std::size_t wrong = 0;
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; q != rank() && i < count; ++i) {
      wrong += in[q][i] != Value(q, rank() + i);
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// Even and odd ranks each get a communicator of their own; its allreduce
// sums its members only.
DIST_TEST_P(Reference, SplitByParity, 2, 3, 4) {
  const std::size_t count = GetParam();
  std::unique_ptr<disttest::Communicator> half =
      comm().split(/*color=*/rank() % 2, /*key=*/rank());
  ASSERT_NE(half, nullptr);
  std::vector<std::int64_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = Value(rank(), i);
  half->allreduce(v.data(), count, disttest::ReduceOp::kSum);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t want = 0;
    for (int q = rank() % 2; q < world_size(); q += 2) want += Value(q, i);
    wrong += v[i] != want;
  }
  EXPECT_EQ(wrong, 0u);
}

// The average of small integers is exact in bfloat16 (8 bits of
// precision): rank r gives 2r + (i % 8), the mean is n - 1 + (i % 8).
DIST_TEST_P(Reference, AverageInBfloat16, 1, 2, 4) {
  const std::size_t count = GetParam();
  std::vector<disttest::bfloat16> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    v[i] = disttest::bfloat16(static_cast<float>(2 * rank() + i % 8));
  }
  comm().allreduce(v.data(), count, disttest::ReduceOp::kAvg);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += static_cast<float>(v[i]) !=
             static_cast<float>(world_size() - 1 + i % 8);
  }
  EXPECT_EQ(wrong, 0u);
}

INSTANTIATE_TEST_SUITE_P(Counts, Reference,
                         ::testing::Values(0, 1, 1000, 65536, 1 << 20),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
