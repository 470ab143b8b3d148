// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: reductions at the edges of their element types, which every
// backend that reduces on the host must compute alike (comm/
// reduce_elements.h): small integers that wrap at every count (Open MPI's
// AVX sums saturate them from 16 elements on), a NaN on the last rank only
// under min and max (std::min dropped it), and -0 against +0.
//
//   CheckEdgeReductions(comm());  // On every rank, in a rank's test.
#ifndef DISTTEST_TESTS_SUPPORT_EDGE_REDUCTIONS_H_
#define DISTTEST_TESTS_SUPPORT_EDGE_REDUCTIONS_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/comm/half.h"

namespace disttest::testing {

// Every rank gives `mine` at each of `count` elements: each element of the
// sum (and the product) must be what a serial program wraps it to.
template <typename T>
void ExpectWraps(Communicator& comm, T mine, std::size_t count) {
  const int n = comm.size();
  // Modulo 2^64, then cut to T: what two's complement gives.
  using U = unsigned long long;
  U sum = 0, product = 1;
  for (int r = 0; r < n; ++r) {
    sum += static_cast<U>(mine);
    product *= static_cast<U>(mine);
  }
  const T want_sum = static_cast<T>(sum),
          want_product = static_cast<T>(product);
  std::vector<T> v(count, mine);
  comm.allreduce(v.data(), count, ReduceOp::kSum);
  std::vector<T> p(count, mine);
  comm.allreduce(p.data(), count, ReduceOp::kProd);
  for (std::size_t i = 0; i < count; ++i) {
    if (v[i] != want_sum || p[i] != want_product) {
      ADD_FAILURE() << "count " << count << ", element " << i << " of " << n
                    << " x " << +mine << ": sum " << +v[i] << " (want "
                    << +want_sum << "), product " << +p[i] << " (want "
                    << +want_product << ")";
      return;
    }
  }
}

template <typename T>
void ExpectNanOfTheLastRankKept(Communicator& comm, std::size_t count) {
  const int n = comm.size();
  const T nan = T(std::numeric_limits<float>::quiet_NaN());
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    // Every other element is NaN on the last rank only, 1 elsewhere.
    std::vector<T> v(count, T(1.0f));
    for (std::size_t i = 0; i < count; i += 2) {
      if (comm.rank() == n - 1) v[i] = nan;
    }
    comm.allreduce(v.data(), count, op);
    for (std::size_t i = 0; i < count; ++i) {
      const float got = static_cast<float>(v[i]);
      if (std::isnan(got) != (i % 2 == 0) || (i % 2 == 1 && got != 1.0f)) {
        ADD_FAILURE() << (op == ReduceOp::kMax ? "max" : "min") << " of "
                      << count << ": element " << i << " is " << got
                      << (i % 2 == 0 ? " (want the NaN of rank " +
                                           std::to_string(n - 1) + ")"
                                     : " (want 1)");
        return;
      }
    }
  }
}

inline void CheckEdgeReductions(Communicator& comm) {
  for (std::size_t count : {1, 16, 64, 1001}) {
    ExpectWraps<std::uint8_t>(comm, 200, count);
    ExpectWraps<std::int8_t>(comm, -100, count);
    ExpectWraps<std::int16_t>(comm, 30000, count);
    ExpectWraps<std::uint16_t>(comm, 40000, count);
    ExpectWraps<std::int32_t>(comm, std::numeric_limits<std::int32_t>::max(),
                              count);
    ExpectWraps<std::int64_t>(comm, std::numeric_limits<std::int64_t>::min(),
                              count);
    ExpectNanOfTheLastRankKept<float>(comm, count);
    ExpectNanOfTheLastRankKept<double>(comm, count);
    ExpectNanOfTheLastRankKept<float16>(comm, count);
    ExpectNanOfTheLastRankKept<bfloat16>(comm, count);
  }
  // Unsigned min and max above the signed range (ompi#10648).
  std::uint64_t big = comm.rank() == 0 ? ~std::uint64_t{0} : 1;
  comm.allreduce(&big, 1, ReduceOp::kMin);
  EXPECT_EQ(big, comm.size() == 1 ? ~std::uint64_t{0} : 1u);
  // -0 is below +0: the min is -0 and the max +0 wherever each one is.
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<double> zero(16, comm.rank() % 2 == 0 ? 0.0 : -0.0);
    comm.allreduce(zero.data(), zero.size(), op);
    const bool negative = op == ReduceOp::kMin && comm.size() > 1;
    for (double z : zero) {
      EXPECT_EQ(std::signbit(z), negative)
          << (op == ReduceOp::kMin ? "min" : "max") << " of +0 and -0";
    }
  }
}

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SUPPORT_EDGE_REDUCTIONS_H_
