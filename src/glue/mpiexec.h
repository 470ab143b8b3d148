// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// LaunchMode::kMpiexec: a test's ranks started by MPI's mpiexec, each
// running only this test as a launched rank (launched.h), and rank 0's
// report of it raised as this test's own verdict.
//
//   if (spec.options.launch == LaunchMode::kMpiexec) return
//   RunUnderMpiexec(spec);
#ifndef DISTTEST_SRC_GLUE_MPIEXEC_H_
#define DISTTEST_SRC_GLUE_MPIEXEC_H_

#include "harness/spec.h"

namespace disttest::internal {

// Runs `spec`'s test under mpiexec and reports its verdict, skip or
// failures here: failures at their own file and line, each labelled by
// rank as rank 0 gave them; an mpiexec that ends without rank 0's report,
// or with a status its report does not explain, fails the test saying so.
// Skips it where there is no mpiexec.
void RunUnderMpiexec(const TestSpec& spec);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_MPIEXEC_H_
