// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Must not compile: an unordered container cannot be compared across ranks
// (its order differs from rank to rank). tests/CMakeLists.txt checks that
// the compiler refuses it, naming CannotBeComparedAcrossRanks and what to
// compare instead.
#include <disttest/disttest.h>

#include <unordered_map>

namespace {
class Unsendable : public disttest::DistributedTest {};
DIST_TEST_F(Unsendable, UnorderedMap) {
  std::unordered_map<int, int> m;
  DIST_EXPECT_ALL_EQ(m);
}
}  // namespace
