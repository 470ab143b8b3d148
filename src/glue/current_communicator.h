// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The rank this process runs, and its communicator, for code that has no
// fixture at hand (the collective assertions, disttest::CurrentRank()). Set
// by the gtest glue around SetUpRank(), the body and TearDownRank() (and a
// DistributedFixture's Run()); null elsewhere.
#ifndef DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_
#define DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"

namespace disttest::internal {

Communicator* CurrentCommunicatorOrNull();
// The rank of `env` over `comm` is the current one until ClearCurrentRank().
void SetCurrentRank(const RankEnv& env, Communicator* comm);
void ClearCurrentRank();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_
