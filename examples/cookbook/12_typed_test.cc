// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 12: one test body for every data type.
//
// DIST_TYPED_TEST is TYPED_TEST with world sizes: one gtest suite per type,
// "Dtypes/float32.SumsInItsType/4ranks". In the body TypeParam is the type,
// and the fixture's members need this-> (the fixture is a template), as in
// any typed gtest test.
#include <disttest/disttest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace {

template <typename T>
class Dtypes : public disttest::DistributedTest {};

// Names for the suites (gtest's default is the type's index).
struct DtypeNames {
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, std::int32_t>) return "int32";
    if (std::is_same_v<T, std::int64_t>) return "int64";
    if (std::is_same_v<T, disttest::float16>) return "float16";
    if (std::is_same_v<T, disttest::bfloat16>) return "bfloat16";
    return std::is_same_v<T, float> ? "float32" : "float64";
  }
};

// float16 and bfloat16 (disttest/comm/half.h) convert from float
// explicitly, as the body does for every type.
using AllDtypes = ::testing::Types<std::int32_t, std::int64_t, float, double,
                                   disttest::float16, disttest::bfloat16>;
DIST_TYPED_TEST_SUITE(Dtypes, AllDtypes, DtypeNames);

DIST_TYPED_TEST(Dtypes, SumsInItsType, 2, 4) {
  std::vector<TypeParam> v(1000,
                           TypeParam(static_cast<float>(this->rank() + 1)));
  this->comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
  const int n = this->world_size();
  for (const TypeParam x : v) {
    ASSERT_EQ(x, TypeParam(static_cast<float>(n * (n + 1) / 2)));
  }
}

DIST_TYPED_TEST(Dtypes, BroadcastsFromTheLastRank, 3) {
  TypeParam x = TypeParam(this->rank() == 2 ? 42.0f : 0.0f);
  this->comm().broadcast(&x, 1, /*root=*/2);
  EXPECT_EQ(x, TypeParam(42.0f));
}

}  // namespace
