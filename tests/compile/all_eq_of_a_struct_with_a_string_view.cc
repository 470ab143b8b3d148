// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Must not compile: a trivially copyable struct whose bytes hold an address
// (a string_view) means nothing in another rank; only a type marked
// disttest::ComparableAcrossRanks is sent as its bytes.
#include <disttest/disttest.h>

#include <string_view>

namespace {
struct Key {
  std::string_view table;
  int shard;
  bool operator==(const Key&) const = default;
};
class Unsendable : public disttest::DistributedTest {};
DIST_TEST_F(Unsendable, StructWithAStringView) {
  DIST_EXPECT_ALL_EQ((Key{"weights", rank()}));
}
}  // namespace
