// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "disttest/distributed_test.h"

namespace disttest::internal {

std::string DistributedTestName(const char* name, int world_size) {
  return fmt::format("{}/{}ranks", name, world_size);
}

}  // namespace disttest::internal
