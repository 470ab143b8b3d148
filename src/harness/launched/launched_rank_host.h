// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The host of a launched rank: this process, one of a job that a launcher
// started, runs one step of a test (a fixture, or the test itself) in
// place, through RunRank (run_rank.h).
//
//   RunLaunchedRank(job, StepKeys(seq, step), n, program, options,
//                   deadline, "Suite.Test/4ranks");
//
// What it adds to RunRank: the step's rank environment (RANK, WORLD_SIZE,
// LOCAL_RANK, ... for the first n ranks) put in the process environment for
// the body and the launcher's put back after it; the watchdog armed from
// before connecting (which can hang on a dead peer too) until the program
// returns; the job's communicator for n ranks, kept between tests; every
// result, then "<count> <verdict>", to the store for rank 0 to judge.
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_LAUNCHED_RANK_HOST_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_LAUNCHED_RANK_HOST_H_

#include <string>

#include "disttest/harness/options.h"
#include "harness/launched/job.h"
#include "harness/launched/keys.h"
#include "harness/rank/run_rank.h"

namespace disttest::internal::launched {

// The rank environment of this process in a step of `n` ranks (n <= the
// job's size; this rank < n): at most n of them on this node.
RankEnv StepEnv(const LauncherEnv& job, int n);

// Runs `program` as this process's rank of a step of `n` ranks; returns
// its verdict, which is in the store too.
RankVerdict RunLaunchedRank(LaunchedJob& job, const StepKeys& keys, int n,
                            RankProgram& program, const Options& options,
                            Clock::time_point deadline,
                            const std::string& what);

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_LAUNCHED_RANK_HOST_H_
