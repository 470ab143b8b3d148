// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How many threads this process runs: a fork() from a process that runs
// more than one may be followed only by async-signal-safe calls until exec.
//
//   if (ThreadCount() == 1) { /* fork, and run code in the child */ }
#ifndef DISTTEST_SRC_BASE_THREADS_H_
#define DISTTEST_SRC_BASE_THREADS_H_

#include <cstddef>

namespace disttest::internal {

// The entries of /proc/self/task; 0 when it cannot be read.
std::size_t ThreadCount();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_THREADS_H_
