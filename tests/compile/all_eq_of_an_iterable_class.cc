// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Must not compile: a class that can be iterated but has an == of its own
// (a shape beside its data) is not compared element by element.
#include <disttest/disttest.h>

#include <vector>

namespace {
struct Tensor {
  std::vector<float> data;
  int rows = 0, cols = 0;
  auto begin() const { return data.begin(); }
  auto end() const { return data.end(); }
  bool operator==(const Tensor&) const = default;
};
class Unsendable : public disttest::DistributedTest {};
DIST_TEST_F(Unsendable, IterableClass) { DIST_EXPECT_ALL_EQ(Tensor{}); }
}  // namespace
