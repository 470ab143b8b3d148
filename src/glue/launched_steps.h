// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The steps of a launched test (launched_steps.cc), for its run
// (launched.cc), and the failure and skip they both report at the test.
#ifndef DISTTEST_SRC_GLUE_LAUNCHED_STEPS_H_
#define DISTTEST_SRC_GLUE_LAUNCHED_STEPS_H_

#include <string>

#include "disttest/distributed_test.h"
#include "harness/launched/job.h"
#include "harness/spec.h"

namespace disttest::internal {

// A fatal failure, or a skip, at the test's line.
void Fatal(const TestSpec& spec, const std::string& message);
void Skip(const TestSpec& spec, const std::string& why);

// The test's steps (each fixture, then the test) on the ranks they need:
// the meeting, the fixtures' directories, then each step in turn.
// `no_body`: gtest ran no body in this process (a fatal failure or a skip
// in the fixture's constructor or SetUp()); its steps report what gtest
// recorded instead (RecordedInThisRank()), `test` a stand-in.
// `*told`: set when a step reported what gtest recorded before the body.
void RunSteps(launched::LaunchedJob& job, DistributedTest& test,
              const TestSpec& spec, int seq, bool no_body, bool* told);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_LAUNCHED_STEPS_H_
