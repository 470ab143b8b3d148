// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The child binary of coverage_test, built with --coverage: a function that
// only ranks call. coverage_test runs it and reads its line counts back.
// Nothing here is run on its own by ctest.
#include <disttest/disttest.h>

#include <cstdlib>
#include <string>

namespace {

int OnlyInRanks(int rank) {
  return rank * 2 + 1;  // marker-only-in-ranks
}

class Covered : public disttest::DistributedTest {
 protected:
  Covered() {
    const char* mode = std::getenv("COVERAGE_LAUNCH");  // marker-parent
    if (mode != nullptr && std::string(mode) == "exec") {
      options().launch = disttest::LaunchMode::kExec;
    }
    if (std::getenv("COVERAGE_POOLED") != nullptr) {
      options().reuse_workers = true;
    }
  }
};

DIST_TEST_F(Covered, CallsAFunctionOnlyInRanks, 3) {
  EXPECT_EQ(OnlyInRanks(rank()), rank() * 2 + 1);
}

DIST_TEST_F(Covered, CallsItAgain, 3) {
  EXPECT_EQ(OnlyInRanks(rank()), rank() * 2 + 1);
}

}  // namespace
