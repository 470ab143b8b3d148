// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/descriptors.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace disttest::internal {

std::optional<std::vector<int>> OpenDescriptors() {
  std::vector<int> fds;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    fds.push_back(std::atoi(it->path().filename().c_str()));
  }
  if (ec) return std::nullopt;
  return fds;
}

}  // namespace disttest::internal
