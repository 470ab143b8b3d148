// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A launched run: the test binary was started once per rank by srun, mpirun
// or torchrun (or with DISTTEST_LAUNCHER=launched), so this process is a rank
// of the whole run and runs each DIST_TEST_F body itself instead of spawning
// ranks; rank 0 judges and reports every test for all.
//
//   if (LaunchedRun()) return RunLaunched(test);   // in TestBody()
//
// How each test runs on every rank, step by step, and what a dead or hung
// rank does to the run: docs/how-it-works.md#a-launched-job.
#ifndef DISTTEST_SRC_GLUE_LAUNCHED_H_
#define DISTTEST_SRC_GLUE_LAUNCHED_H_

#include "disttest/distributed_test.h"
#include "disttest/launch/launcher_env.h"
#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal {

// Whether this process is a rank of a launched run: DISTTEST_LAUNCHER is
// "launched" (or "external", its old name), or it is unset and a launcher with
// more than one rank is found in the environment (launcher_env.h).
// DISTTEST_LAUNCHER=spawn turns it off. Decided once.
bool LaunchedRun();

// The launcher's variables of a launched run (its launcher, rank and world
// size); null where this process is no launched rank, or its environment is
// unusable (LaunchedRun() fails each test then, saying why).
const LauncherEnv* LaunchedEnvOrNull();

// After a test that SIGTERM or SIGINT ended (harness/process/interrupt.h):
// fails it if it has not failed, skips the rest (--gtest_fail_fast), and ends
// the process by the signal once gtest has written its files (a
// `launched` rank: after its goodbye); says so unless `quiet`. Nothing
// when no signal came.
void StopAfterInterrupt(const TestSpec& spec, bool quiet, bool launched);

// Runs the current DIST_TEST_F test as this process's rank. Where gtest
// runs no body (a fatal failure or a skip in the fixture's constructor or
// SetUp()), a listener runs it at the test's end with `no_body`, on a
// stand-in object, so that the ranks meet and rank 0 reports why; it also
// brings rank 0 what the other ranks recorded outside their bodies (the
// constructor, SetUp(), TearDown(), the destructor), which gtest records
// in each rank's own process only.
void RunLaunched(DistributedTest& test, bool no_body = false);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_LAUNCHED_H_
