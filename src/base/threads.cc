// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/threads.h"

#include <filesystem>
#include <system_error>

namespace disttest::internal {

std::size_t ThreadCount() {
  std::size_t threads = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++threads;
  }
  return threads;
}

}  // namespace disttest::internal
