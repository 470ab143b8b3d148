// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>

#include "disttest/distributed_test.h"

namespace disttest::internal {

std::map<std::string, std::function<DistributedTest*()>>& TestFactories() {
  // Never destroyed: registration runs during static initialisation, in any
  // order, and pooled ranks leave with _exit.
  static auto* factories =
      new std::map<std::string, std::function<DistributedTest*()>>;
  return *factories;
}

std::string DistributedTestName(const char* name, int world_size) {
  if (world_size >= 1 && world_size <= kMaxWorldSize) {
    return fmt::format("{}/{}ranks", name, world_size);
  }
  // Still registered, so that running it says what is wrong; named without
  // '-', which --gtest_filter would read as the start of a negative pattern.
  return fmt::format("{}/invalid_world_size_{}{}", name,
                     world_size < 0 ? "minus_" : "",
                     world_size < 0 ? -static_cast<long>(world_size)
                                    : static_cast<long>(world_size));
}

std::string DuplicateWorldSizeName(const char* name, int world_size,
                                   const std::vector<int>& sizes,
                                   std::size_t index) {
  const long earlier =
      std::count(sizes.begin(), sizes.begin() + index, world_size);
  std::string test = DistributedTestName(name, world_size) + "_listed_again";
  if (earlier > 1) test += std::to_string(earlier);
  return test;
}

std::string DuplicateWorldSizeError(const char* suite, const char* name,
                                    int world_size) {
  return fmt::format(
      "DIST_TEST_F({}, {}, ...) lists world size {} more than once; list "
      "each world size once",
      suite, name, world_size);
}

}  // namespace disttest::internal
