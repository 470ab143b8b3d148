// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The communicator of the rank this process runs, for code that has no
// fixture at hand (the collective assertions). Set by the gtest glue around
// SetUpRank(), the body and TearDownRank(); null elsewhere.
#ifndef DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_
#define DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_

#include "disttest/comm/communicator.h"

namespace disttest::internal {

Communicator* CurrentCommunicatorOrNull();
void SetCurrentCommunicator(Communicator* comm);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_CURRENT_COMMUNICATOR_H_
