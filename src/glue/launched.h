// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Running under an external launcher: the test binary was started once per
// rank by srun, mpirun or torchrun (or with DISTTEST_LAUNCHER=external), so
// this process is a rank of the whole run and runs each DIST_TEST_F body
// itself instead of spawning ranks.
//
//   if (ExternalLaunch()) return RunExternal(test);   // in TestBody()
//
// How a test runs, on every process, in the same order:
//   1. Meet: each rank writes the test's name to the store; rank 0 compares
//      them and fails the test on every rank when they differ (different
//      filters or shuffle seeds), rather than let collectives deadlock.
//   2. Sizes: a test of size N == launched size M runs on every rank; N < M
//      runs on ranks 0..N-1 while the others wait; N > M is skipped ("needs
//      N ranks, launched with M").
//   3. Body: as in a spawned rank (GtestRankProgram), over a communicator
//      created once per size and reused until a test fails.
//   4. Report: each rank puts its results in the store; rank 0 judges them
//      as the spawned harness does ("[rank r/N] ..." at file:line), prints
//      and writes the XML; it publishes the verdict, which every other rank
//      mirrors, silently, so that every process exits non-zero when any
//      test failed.
// A rank that dies stops heartbeating; whoever waits for it gives up after
// a few seconds and fails the test on every rank (an abort key in the
// store), and every later test fails at once. A body that outlives the
// test's timeout prints its process's stacks and ends the process.
#ifndef DISTTEST_SRC_GLUE_LAUNCHED_H_
#define DISTTEST_SRC_GLUE_LAUNCHED_H_

#include "disttest/distributed_test.h"
#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal {

// Whether this process runs under an external launcher: DISTTEST_LAUNCHER
// is "external", or it is unset and a launcher with more than one rank is
// found in the environment (launcher_env.h). DISTTEST_LAUNCHER=spawn turns
// it off. Decided once.
bool ExternalLaunch();

// After a test that SIGTERM or SIGINT ended (harness/interrupt.h): fails
// it if it has not failed, skips the rest (--gtest_fail_fast), and ends
// the process by the signal once gtest has written its files (a
// `launched` rank: after its goodbye); says so unless `quiet`. Nothing
// when no signal came.
void StopAfterInterrupt(const TestSpec& spec, bool quiet, bool launched);

// Runs the current DIST_TEST_F test as this process's rank.
void RunExternal(DistributedTest& test);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_LAUNCHED_H_
