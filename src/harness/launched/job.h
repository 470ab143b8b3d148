// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// LaunchedJob: this process's part in a job that mpirun, srun or torchrun
// started (one process per rank, each running the test binary): the store
// (rank 0 serves it from a thread), two connections to it, the liveness,
// the communicators and the watchdog. Created at the first distributed
// test and kept until the process exits.
//
//   LaunchedJob& job = LaunchedJob::Join(launcher_env);   // throws
//   ... each test: step_protocol.h ...
//   job.Goodbye();   // at the end of the run
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_JOB_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_JOB_H_

#include <memory>

#include "comm/ledger.h"
#include "disttest/launch/launcher_env.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/launched/communicators.h"
#include "harness/launched/liveness.h"
#include "harness/launched/watchdog.h"
#include "rendezvous/store_server_thread.h"

namespace disttest::internal::launched {

class LaunchedJob {
 public:
  // The job, joined at the first call (rank 0 starts the store; every rank
  // connects, waiting for it); later calls return it. Throws StoreError.
  static LaunchedJob& Join(const LauncherEnv& env);
  LaunchedJob(const LaunchedJob&) = delete;
  LaunchedJob& operator=(const LaunchedJob&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const LauncherEnv& env() const { return env_; }
  // The main thread's connection.
  TcpStore& store() { return *store_; }
  SideChannel& side() { return side_; }
  Liveness& liveness() { return liveness_; }
  Communicators& communicators() { return communicators_; }
  Watchdog& watchdog() { return watchdog_; }
  // This process's collective ledger (comm/ledger.h), area 0.
  RankLedgerView ReadLedger() const { return ledger_->Read(0, rank()); }
  // The number of the next test (every rank counts the same).
  int NextSeq() { return seq_++; }
  // A test's start waited (its whole deadline, or until all came) for
  // every rank: after one, a rank that never reached the store never will.
  // (Not after a start that trouble elsewhere cut short.)
  void NoteStartWaited() { start_waited_ = true; }
  // Why another process joined as one of the ranks ("" when none has):
  // this run's results are not the ranks' (ClaimKey).
  std::string Duplicate();
  // Rank 0, once every rank has connected: the token's file (token_file.h)
  // is needed no more.
  void AllJoined();

  // At the end of the run. Launchers such as mpirun end every process
  // once one exits with an error, so no rank may leave before rank 0 is
  // done: each says goodbye, rank 0 waits for every rank still alive, then
  // announces the end, which the others wait for (or for rank 0's store to
  // go).
  void Goodbye();

 private:
  explicit LaunchedJob(LauncherEnv env);
  // Counts this process in as its rank; a second one for a rank says why
  // the run is void (kDuplicateKey), breaks it, and throws ConfigError.
  void ClaimRank();

  LauncherEnv env_;
  // Where rank 0 keeps the store's token for ranks on other hosts
  // (token_file.h); "" where the launcher gave a secret, or on loopback.
  std::string token_file_;
  std::shared_ptr<LedgerMemory> ledger_;
  std::unique_ptr<StoreServerThread> server_;
  std::unique_ptr<TcpStore> store_;
  SideChannel side_;
  Liveness liveness_;
  Communicators communicators_;
  Watchdog watchdog_;
  int seq_ = 0;
  bool start_waited_ = false;
};

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_JOB_H_
