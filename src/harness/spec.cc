// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/spec.h"

#include <fmt/format.h>

namespace disttest::internal {

std::string RankLabel(const TestSpec& spec, int rank) {
  if (spec.fixture.empty()) {
    return fmt::format("[rank {}/{}]", rank, spec.world_size);
  }
  return fmt::format("[{} rank {}/{}]", spec.fixture, rank, spec.world_size);
}

}  // namespace disttest::internal
