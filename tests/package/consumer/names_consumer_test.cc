// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Tests that ctest must report as they ended, whatever their names and
// whatever came after a skip (package.consumer_names; label "names", left
// out of the consumer's other runs). Each typed test fails when it runs: a
// name that the discovered filter did not select would run no test, and a
// run of no test passes.
#include <disttest/disttest.h>
#include <gtest/gtest.h>

#include <string>

namespace {

template <typename T>
class Odd : public disttest::DistributedTest {};

// gtest's own GetTypeName gives "unsigned int", with a space.
struct OddNames {
  template <typename T>
  static std::string GetName(int i) {
    switch (i) {
      case 0:
        return "int-32";
      case 1:
        return "dou:ble";
      case 2:
        return "f*oat";
      default:
        return ::testing::internal::GetTypeName<T>();
    }
  }
};

using OddTypes = ::testing::Types<int, double, float, unsigned int>;
DIST_TYPED_TEST_SUITE(Odd, OddTypes, OddNames);

DIST_TYPED_TEST(Odd, FailsWhenItRuns, 2) {
  ADD_FAILURE() << "marker-ran " << sizeof(TypeParam);
}

// A skip, then a failure after the test, in a global Environment's
// TearDown(): the run exits 1, and ctest must call it failed, not skipped.
class FailsAfterTheSkip : public ::testing::Environment {
  void TearDown() override {
    if (GTEST_FLAG_GET(filter).find("ThenFails") != std::string::npos) {
      ADD_FAILURE() << "marker-failure-after-the-skip";
    }
  }
};
const auto* const kFailsAfterTheSkip =
    ::testing::AddGlobalTestEnvironment(new FailsAfterTheSkip);

class Skips : public disttest::DistributedTest {};

DIST_TEST_F(Skips, ThenFails, 2) { GTEST_SKIP() << "marker-skip"; }

// A skip alone: skipped in ctest.
DIST_TEST_F(Skips, Only, 2) { GTEST_SKIP() << "marker-skip"; }

}  // namespace
