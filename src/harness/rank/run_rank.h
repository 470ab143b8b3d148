// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RunRank: the one code that runs a body as a rank, whichever way its
// process came to be (rank_host.h): environment in, communicator and
// barrier, the program (set-up, body, tear-down) with every result
// reported, the verdict out. Read top to bottom in run_rank.cc.
//
//   class MyProgram : public RankProgram { ... };
//   SpawnedRankHost host(program, options, arena);
//   RankVerdict v = RunRank(program, options, host);
//
// The rules it keeps for both hosts:
//   - every blocking operation of a rank gives up at RankTimeout(), before
//     the test's deadline, so that a stuck collective names itself (which
//     operation, which peer) before the rank is ended from outside;
//   - a communicator is connected and passes a barrier before any body
//     runs: a rank that cannot connect fails as "disttest could not set up
//     the rank", not somewhere in the test's code;
//   - an exception from the harness's part is a fatal failure at the
//     test's file:line, and the rank still reports.
#ifndef DISTTEST_SRC_HARNESS_RANK_RUN_RANK_H_
#define DISTTEST_SRC_HARNESS_RANK_RUN_RANK_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/harness/options.h"
#include "disttest/rendezvous/store.h"
#include "harness/channel/result_channel.h"
#include "harness/rank/rank_host.h"
#include "harness/rank_verdict.h"

namespace disttest::internal {

using ReportFn = std::function<void(const RankMessage&)>;

// What a rank runs once its communicator is up. Implemented by the gtest
// glue; Run() must not throw.
class RankProgram {
 public:
  virtual ~RankProgram() = default;
  // `comm` is null when options.init_distributed is false; `store` is the
  // test's store, connected on first use.
  virtual RankVerdict Run(const RankEnv& env, Communicator* comm, Store& store,
                          const ReportFn& report) = 0;
  // Where harness failures (rendezvous, communicator) are reported.
  virtual const char* file() const = 0;
  virtual int line() const = 0;
  // A pooled rank's next test, by its full gtest name; null when this
  // binary has no such test. May throw (a fixture's constructor).
  virtual std::unique_ptr<RankProgram> Next(const std::string& /*test*/) {
    return nullptr;
  }
};

// Runs `program` as a rank of its test on `host`; returns the rank's last
// verdict (host.Finish's). Throws only what host.Finish throws: a launched
// rank's store that is gone (a spawned host catches everything).
RankVerdict RunRank(RankProgram& program, const Options& options,
                    RankHost& host);

// Runs `program`'s test, then, under LeakSanitizer and unless it failed,
// checks for the leaks it left (in phase kCheckingLeaks): they are the
// rank's failure (through `report`, with the report's first lines). Both
// hosts' runs and a pooled rank's next tests go here.
RankVerdict RunProgram(RankProgram& program, const RankEnv& env,
                       Communicator* comm, Store& store,
                       const ReportFn& report);

// `m` as a host sends it: a failure that reports an error a peer caused in
// this process (comm/peer_errors.h) is marked as following from it
// (RankMessage::follows). Both hosts' Report() send through it.
RankMessage MarkedIfItFollows(RankMessage m);

// The deadline of every blocking operation in a rank of a test with
// timeout `test`: a tenth (at most 5 s) shorter, so that a rank stuck in
// a collective reports which operation and which peer before the test's
// deadline ends it; a day while DISTTEST_DEBUG_RANK names one of its ranks.
std::chrono::milliseconds RankTimeout(const RankEnv& env,
                                      std::chrono::milliseconds test);

// gtest's --gtest_break_on_failure in a rank: says which rank and pid
// failed at `where` and waits until a debugger has attached (any process
// of this user may); gtest's own break then stops it there.
void StopAtFailureForDebugger(int rank, const std::string& where);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_RUN_RANK_H_
