// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/harness/options.h"

namespace disttest {

const char* Name(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kExec:
      return "exec";
    case LaunchMode::kThreads:
      return "threads";
    case LaunchMode::kMpiexec:
      return "mpiexec";
    case LaunchMode::kFork:
      break;
  }
  return "fork";
}

}  // namespace disttest
