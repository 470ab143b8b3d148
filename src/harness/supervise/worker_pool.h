// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks (options().reuse_workers), the parent's side: it keeps a
// test's ranks (WorkerPools) for the next test that can share them.
//
//   std::vector<RankReport> r = WorkerPools::Get().Run(spec, entry);
//
// The protocol, and the rank side: pooled_rank.h.
#ifndef DISTTEST_SRC_HARNESS_SUPERVISE_WORKER_POOL_H_
#define DISTTEST_SRC_HARNESS_SUPERVISE_WORKER_POOL_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/report/rank_report.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/spec.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {

// The parent's pools, one per kind of test that can share ranks.
class WorkerPools {
 public:
  static WorkerPools& Get();
  // Only in the process that made the pools: a forked child that calls
  // exit() (a death test, a rank) must not end the parent's ranks.
  ~WorkerPools();

  // Runs `spec` on the ranks of the pool for its kind (same test suite,
  // world size, address, timeout, GPUs and rank environment), started now
  // when there is none. `entry` is the test's rank code, which ranks forked
  // for it run. Throws as RunTest does.
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
  // A test suite has ended: its pools end too. Ranks are forked from the
  // parent as it is when a suite's first test starts, after the suite's
  // SetUpTestSuite(): reused in a later suite (or in a later run of this
  // one, --gtest_repeat), they would lack what that suite's set it up with.
  void EndOfSuite();

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

#endif  // DISTTEST_SRC_HARNESS_SUPERVISE_WORKER_POOL_H_
