// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankHost: what differs between the two ways a rank comes to be, and
// nothing else. RunRank (run_rank.h) runs a body as a rank on either.
//
//   SpawnedRankHost (spawned_rank_host.h): a process of its own, started by
//     the supervisor; results go to its shared-memory queue, collectives
//     through the host arena; it waits for a debugger when asked, meets its
//     peers at the end and leaves with _exit.
//   LaunchedRankHost (launched/launched_rank_host.h): a process that mpirun,
//     srun or torchrun started, which runs each test's body in place;
//     results go to the job's store, communicators are kept between tests,
//     the rank environment is put in place for the body and taken away
//     after it.
//
// The order is RunRank's: Enter, Connect (when the test wants a
// communicator), the program with every result to Report, Finish.
#ifndef DISTTEST_SRC_HARNESS_RANK_RANK_HOST_H_
#define DISTTEST_SRC_HARNESS_RANK_RANK_HOST_H_

#include <chrono>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/harness/options.h"
#include "disttest/rendezvous/store.h"
#include "harness/channel/result_channel.h"
#include "harness/rank_verdict.h"

namespace disttest::internal {

class RankHost {
 public:
  virtual ~RankHost() = default;

  // This rank's environment for the test, put in place; throws (a
  // malformed variable, say).
  virtual RankEnv Enter() = 0;
  // The test's store: the harness's keys and, under "test/", the test's.
  virtual Store& store() = 0;
  // A communicator over the test's ranks whose every operation gives up
  // after `timeout`; owned by the host. Throws when it cannot connect.
  virtual Communicator* Connect(const RankEnv& env, const Options& options,
                                std::chrono::milliseconds timeout) = 0;
  // One result of the rank, in the order they happen. Never throws.
  virtual void Report(const RankMessage& message) = 0;
  // The rank's part is over: its verdict goes where the judge reads it.
  // Returns the rank's last verdict (a pooled rank runs more tests first).
  virtual RankVerdict Finish(RankVerdict verdict, Communicator* comm) = 0;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_RANK_HOST_H_
