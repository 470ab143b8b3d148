// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How a launched job runs one test, the same on every process: the plans'
// comparison, the meeting, and each step's reports and verdict (the store
// keys are in keys.h). The protocol, and what a dead or hung rank does to
// the run: docs/how-it-works.md#a-launched-job.
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_STEP_PROTOCOL_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_STEP_PROTOCOL_H_

#include <string>
#include <vector>

#include "harness/launched/job.h"
#include "harness/launched/keys.h"
#include "harness/rank_verdict.h"
#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal::launched {

// What a rank will run, compared across ranks before the first test:
// `world_size` as its environment says, gtest's repeat count, the settings
// every rank must share ("DISTTEST_TIMEOUT=60", "DISTTEST_TIMEOUT_SCALE
// unset": a timeout is part of a communicator's rendezvous keys), and the
// names of the tests it will run, in order, each with its parameter as
// gtest prints it ("" for none: every process makes them anew).
struct RunPlan {
  int world_size = 0;
  int repeat = 1;
  std::vector<std::string> settings;
  std::vector<std::string> tests;
  std::vector<std::string> params;  // One per test, or none at all.

  std::string Encode() const;
  static RunPlan Decode(const std::string& text);
};

// How `mine` differs from rank 0's `zero`: "" when it does not, else
// "says WORLD_SIZE=8 (rank 0: 4)", "lacks 2 of rank 0's tests (A.B/2ranks,
// A.C/2ranks)", "runs 1 test rank 0 does not (A.D/2ranks)", "runs them in
// another order (...)", joined by "; ".
std::string PlanDifference(const RunPlan& mine, const RunPlan& zero);

// Before the first test, once: rank 0 publishes its plan, every other rank
// compares its own with it and says how it differs, and rank 0 shares what
// all said. Throws Error on every rank naming each rank that differs and
// how, so that ranks given other tests, another filter or another
// WORLD_SIZE end at once instead of at a test's timeout.
void ComparePlans(LaunchedJob& job, const RunPlan& plan,
                  Clock::time_point deadline);

// Every rank meets at test number `seq`, named `name`; throws Error on
// every rank when they are not at the same test, or when one does not
// come before `deadline`.
void MeetAtTest(LaunchedJob& job, int seq, const std::string& name,
                Clock::time_point deadline);

// Rank 0 publishes `value` under `key`; every other rank waits for it.
// Returns the value on every rank.
std::string ShareFromRankZero(LaunchedJob& job, const std::string& key,
                              const std::string& value,
                              Clock::time_point deadline,
                              const std::string& what);

// Rank 0: every rank's report of the step of `spec.world_size` ranks. A rank
// whose results do not come by `deadline` plus a grace (or that stopped
// heartbeating, or said its body hangs) gets a report that says so.
std::vector<RankReport> GatherReports(LaunchedJob& job, const StepKeys& keys,
                                      const TestSpec& spec,
                                      Clock::time_point deadline);

// Rank 0: the step's verdict, for every other rank.
void PublishVerdict(LaunchedJob& job, const StepKeys& keys,
                    RankVerdict verdict);

// Ranks but 0: rank 0's verdict of the step; throws Error when none comes.
RankVerdict AwaitVerdict(LaunchedJob& job, const StepKeys& keys,
                         const std::string& name, Clock::time_point deadline);

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_STEP_PROTOCOL_H_
