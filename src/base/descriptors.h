// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The descriptors this process has open, from /proc/self/fd.
//
//   if (auto fds = OpenDescriptors()) for (int fd : *fds) ...
#ifndef DISTTEST_SRC_BASE_DESCRIPTORS_H_
#define DISTTEST_SRC_BASE_DESCRIPTORS_H_

#include <optional>
#include <vector>

namespace disttest::internal {

// Their numbers (including the one the listing itself used, closed by the
// time this returns); nullopt when /proc/self/fd cannot be read.
std::optional<std::vector<int>> OpenDescriptors();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_DESCRIPTORS_H_
