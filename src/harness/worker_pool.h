// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks (options().reuse_workers), the rank's side: after its first
// test a pooled rank parks, waiting in the store for the name of its next
// test, and runs it on the same communicator. The protocol, whole:
//   - the supervisor spawns the ranks with DISTTEST_INTERNAL_POOL=1;
//   - each test's verdict is a kDone result; a rank that passed or skipped
//     with a communicator that never failed then waits on PoolKey(n) for
//     n = 1, 2, ... (Supervisor::AwaitParked sees every rank waiting);
//   - the supervisor sets PoolKey(n) to the next test's full gtest name,
//     which the ranks run under the store prefix PoolKey(n);
//   - an empty name, or a failure here, ends the pool: the rank goes on to
//     the exit meeting and leaves.
#ifndef DISTTEST_SRC_HARNESS_WORKER_POOL_H_
#define DISTTEST_SRC_HARNESS_WORKER_POOL_H_

#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/rank_main.h"

namespace disttest::internal {

// "disttest/pool/<n>": the n-th test handed to parked ranks (n >= 1).
std::string PoolKey(int n);

// Whether this rank was started for a pool (DISTTEST_INTERNAL_POOL).
bool PooledRank();

// Whether a pooled rank's communicator may serve another test: no operation
// of it failed (a test may have caught the CommError). A rank whose
// communicator failed leaves after its verdict, and the parent starts over
// with fresh ranks.
bool ReusableCommunicator(Communicator* comm);

// Runs the tests the parent hands this rank until it says leave (or one
// fails here); returns the last verdict. Each test's verdict is reported.
RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store,
                      const ReportFn& report);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_WORKER_POOL_H_
