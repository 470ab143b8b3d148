// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/harness/options.h"

namespace disttest {

const char* Name(LaunchMode mode) {
  return mode == LaunchMode::kExec ? "exec" : "fork";
}

}  // namespace disttest
