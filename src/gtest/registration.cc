// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

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

}  // namespace disttest::internal
