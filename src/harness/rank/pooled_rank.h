// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks (options().reuse_workers), the rank's side: after its first
// test a pooled rank parks (ServePool), waiting for the name of its next
// test, and runs it on the same communicator. The parent's side, which keeps
// the ranks between tests, is WorkerPools (worker_pool.h).
//
// The protocol, whole:
//   - the supervisor spawns the ranks with DISTTEST_INTERNAL_POOL=1;
//   - each test's verdict is a kDone result; a rank that passed or skipped
//     with a communicator that never failed parks for test n = 1, 2, ...
//     before it sends that verdict: in the host arena (HostArena::Park),
//     or, without one, by waiting on PoolKey(n) in the store (the pool
//     sees every rank parked or waiting);
//   - the supervisor hands out the next test's full gtest name through the
//     arena (HostArena::Dispatch: one futex wake for every rank; a name
//     over HostArena::kTestNameBytes goes through the store, as without an
//     arena), and the ranks run it under the store prefix PoolKey(n);
//   - an empty name, or a failure here, ends the pool: the rank goes on to
//     the exit meeting and leaves;
//   - a pool ends at a failure (the parent starts over with fresh ranks at
//     the next test), when there are too many, and when the process exits
//     (they outlive --gtest_repeat's iterations). A process that ends with
//     _exit or a signal leaves its pools to its keeper (or, without one,
//     to PR_SET_PDEATHSIG: harness/process/keeper.h), and their queues to
//     the next run's clean-up of dead processes' queues.
#ifndef DISTTEST_SRC_HARNESS_RANK_POOLED_RANK_H_
#define DISTTEST_SRC_HARNESS_RANK_POOLED_RANK_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/rank/run_rank.h"

namespace disttest {
class HostArena;
}  // namespace disttest

namespace disttest::internal {

// "disttest/pool/<n>": the n-th test handed to parked ranks (n >= 1).
std::string PoolKey(int n);

// Whether this rank was started for a pool (DISTTEST_INTERNAL_POOL).
bool PooledRank();

// The threads this process runs just before a pooled rank's test: RunRank
// notes them for the first, ServePool before it makes each next one's
// object. A thread the test starts and leaves running could send
// during the next test, whose receive would then take this one's message:
// it ends the pool (Reusable), as the end of the process ends it in a
// forked rank that is not pooled.
void NoteThreadsBeforeTest();
// The threads the first test object's constructor started (those not in
// `before`, ThreadIds() before it ran) are the test's too, though the
// communicator's own threads start after them (RunAsRank).
void NoteThreadsOfAConstructor(const std::vector<pid_t>& before);

// Whether a pooled rank may serve another test after one that succeeded:
// no operation of its communicator failed (a test may have caught the
// CommError), and no thread the test started still runs (the rank says so
// on stderr, naming them). A rank that may not leaves after its verdict,
// and the parent starts over with fresh ranks.
bool Reusable(Communicator* comm);

// Runs the tests the parent hands this rank until it says leave (or one
// fails here); returns the last verdict. Each test's verdict is reported.
// With a host arena the names come through it (HostArena::AwaitTest),
// else through the store; a rank parks for its next test (Park()) before
// it reports the verdict of the last, so that the parent, which has every
// verdict, finds every rank parked.
RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store, HostArena* arena,
                      const ReportFn& report);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_POOLED_RANK_H_
