// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks (options().reuse_workers), both sides: the parent keeps a
// test's ranks (WorkerPools) for the next test that can share them; after
// its first test a pooled rank parks (ServePool), waiting for the name of
// its next test, and runs it on the same communicator.
//
//   std::vector<RankReport> r = WorkerPools::Get().Run(spec, entry);
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
//     _exit or a signal leaves its pools to PR_SET_PDEATHSIG, and their
//     queues to the next run's clean-up of dead processes' queues.
#ifndef DISTTEST_SRC_HARNESS_WORKER_POOL_H_
#define DISTTEST_SRC_HARNESS_WORKER_POOL_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/launcher.h"
#include "harness/rank_group.h"
#include "harness/rank_main.h"
#include "harness/verdict.h"

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
// With a host arena the names come through it (HostArena::AwaitTest),
// else through the store; a rank parks for its next test (Park()) before
// it reports the verdict of the last, so that the parent, which has every
// verdict, finds every rank parked.
RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store, HostArena* arena,
                      const ReportFn& report);

// The parent's pools, one per kind of test that can share ranks.
class WorkerPools {
 public:
  static WorkerPools& Get();
  // Only in the process that made the pools: a forked child that calls
  // exit() (a death test, a rank) must not end the parent's ranks.
  ~WorkerPools();

  // Runs `spec` on the ranks of the pool for its kind (same world size,
  // address, timeout, GPUs and rank environment), started now when there
  // is none. `entry` is the test's rank code, which ranks forked for it run.
  // Throws as RunTest does.
  std::vector<RankReport> Run(TestSpec spec, RankEntry entry);

  // The tests that ran on the last test's ranks before it, oldest first
  // (empty: its ranks were new).
  std::vector<std::string> LastHistory() const;
  // The last test failed in the parent's judgement (a skip on some ranks
  // only, say) though no rank failed: its ranks are not reused either.
  void EndLast() { End({last_}); }
  // When `world` more ranks would not fit the process limits (a cgroup's
  // pids.max, RLIMIT_NPROC), ends the parked pools other than the one with
  // key `except` ("": all), so that disttest's own idle ranks never make a
  // test fail for want of processes. Says so when it ended any.
  void MakeRoomForProcesses(int world, const std::string& except = "");
  void ShutdownAll();

 private:
  class Pool;

  WorkerPools();
  // Ends the least recently used pool when there are too many, and every
  // pool on GPUs before one on GPUs starts (parked NCCL ranks keep their
  // memory and contexts on the devices).
  void MakeRoomFor(const TestSpec& spec);
  // Tells every one of them first, so that they leave together.
  void End(const std::vector<std::string>& keys);

  // In a fork of the process that owns the pools: sets them aside, neither
  // ended nor used.
  void KeepTheOwnersPools();

  pid_t owner_;  // The process whose pools these are.
  std::map<std::string, std::unique_ptr<Pool>> pools_;
  long clock_ = 0;
  std::string last_;
  std::shared_ptr<const std::vector<std::string>> last_history_;
  std::size_t last_history_size_ = 0;  // Its tests before the last one.
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_WORKER_POOL_H_
