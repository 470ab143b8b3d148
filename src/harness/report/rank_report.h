// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankReport: everything the parent (or launched rank 0) learned about one
// rank of a test: its results, its verdict, how it ended, why it was killed,
// its stacks, ledger and sanitizer report. The verdict (verdict.h) judges a
// test from its ranks' reports.
#ifndef DISTTEST_SRC_HARNESS_REPORT_RANK_REPORT_H_
#define DISTTEST_SRC_HARNESS_REPORT_RANK_REPORT_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.h"
#include "harness/expected_end.h"
#include "harness/rank_message.h"
#include "harness/rank_outcome.h"
#include "harness/rank_verdict.h"
#include "harness/report/sanitizer_report.h"

namespace disttest::internal {

// Everything the parent learned about one rank.
struct RankReport {
  int rank = 0;
  std::vector<RankMessage> results;    // In arrival order; no kDone.
  std::optional<RankVerdict> done;     // The kDone verdict, if it came.
  std::optional<RankOutcome> outcome;  // How it ended; empty if unknown.
  std::string not_started;             // Why the rank was never started.
  std::string killed_because;          // Set when the harness killed the rank.
  // Whose doing its kill (or its not being started) was, as a value the
  // verdict reads: its own (a timeout, a deadlock), or another rank's: it
  // was still running after a peer failed, or a peer could not be started.
  // An end that follows from another rank's failure is listed after it.
  enum class KilledFor { kItself, kPeersFailure, kPeersStart };
  KilledFor killed_for = KilledFor::kItself;
  // Found stopped (SIGSTOP, SIGTSTP, a tracer) when it was killed: likely
  // the cause, whatever the kill's reason.
  bool was_stopped = false;
  // Set when the test's deadline passed while this rank was still running
  // (before its verdict came): a failure however the rank then ended, also
  // when it finished by itself while the harness took the stacks.
  std::string overran;
  std::string stack;  // Its threads' stacks, taken before the kill.
  // Killed while it met the others after its body (its verdict had come):
  // judged by that verdict alone.
  bool killed_after_done = false;
  // A pooled rank still alive after its verdict, waiting for the next test:
  // judged by that verdict alone.
  bool parked = false;
  std::string log_path;  // DISTTEST_LOG_DIR: where its output is kept.
  // Ranks as threads: how its own thread ended the process of every rank
  // (exit()), said as its end instead of the process's status alone.
  std::string ended_the_process;
  // A sanitizer's report in its output (spawned ranks): a failure.
  std::optional<SanitizerReport> sanitizer;
  std::vector<std::string> channel_errors;
  // When the parent received each of `results` (same order), and when it
  // saw the rank end; empty where it does not know (launched mode, where
  // rank 0 gathers the reports at the end). They put the failures in the
  // order they happened: the first is printed first, marked as such.
  std::vector<std::chrono::steady_clock::time_point> received;
  std::optional<std::chrono::steady_clock::time_point> ended_at;
  // When the parent started it (for the trace); empty in launched mode.
  std::optional<std::chrono::steady_clock::time_point> spawned_at;
  // Its collective ledger, read when the harness found the test stuck
  // (before any kill) or, for a test that failed otherwise, at its end.
  std::optional<RankLedgerView> ledger;
  // ExpectRankToEnd(): how a rank (this one or a peer) said this one ends.
  std::optional<ExpectedEnd> expected_end;
};

// Whether `r` ended as a rank declared it would (ExpectRankToEnd), before
// its verdict and by its own hand or a peer's, not the harness's: then its
// end is no failure, and starts no failure grace for its peers.
bool EndedAsExpected(const RankReport& r);

// Whether a rank's own part of the test went wrong: it was not started,
// was killed or overran, reported no pass or skip, reported a failure, or
// not all of its results could be read.
bool RankFailed(const RankReport& r);

// Whether it reported a failure (fatal or not).
bool ReportedAFailure(const RankReport& r);

// A rank's first GTEST_SKIP(), or null when it skipped none.
const RankMessage* FirstSkip(const RankReport& r);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_RANK_REPORT_H_
