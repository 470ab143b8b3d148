// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The verdict of one distributed test: what each rank reported and how each
// rank ended, turned into the findings the parent re-raises.
//
//   std::vector<Finding> findings = Judge(spec, ranks);
//   for (const Finding& f : findings) ...  // "[rank 1/4] Expected ..."
//
// Rules: every reported failure is re-raised at its file:line, prefixed
// "[rank r/N]"; a rank that died, exited early or was killed is a fatal
// failure naming it and the cause; a test is skipped only when every rank
// skipped and none failed; some ranks skipping while others pass is a
// failure unless SkipPolicy::kAllowPartial.
//
// At scale: the same failure (kind, file:line and text, the rank's own
// label taken out) of several ranks is one finding, "[ranks 0-15, 17-255 of
// 256] ...". Where the parent knows when each failure came, findings go in
// that order, except that failures which follow from another rank's (a
// collective a peer broke, a kill after a peer failed) come last; when there
// are several, the first is marked "[rank 3/8] (first failure) ..." (unless
// the next came within 10 ms: which was first is not known then; or every
// failure is of the same ranks, whose own lines give the order): the root
// cause first, its consequences after it.
#ifndef DISTTEST_SRC_HARNESS_VERDICT_H_
#define DISTTEST_SRC_HARNESS_VERDICT_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/ledger.h"
#include "disttest/harness/options.h"
#include "harness/rank_control.h"
#include "harness/rank_outcome.h"
#include "harness/rank_verdict.h"
#include "harness/result_channel.h"
#include "harness/sanitizer_report.h"

namespace disttest::internal {

// What the parent knows about the test it runs.
struct TestSpec {
  std::string name;  // "Suite.Name/2ranks"
  std::string file;  // Where DIST_TEST_F stands.
  int line = 0;
  int world_size = 0;
  Options options;
  // Set when the ranks run a DistributedFixture before the test: its name,
  // which labels messages ("[SavedShards rank 1/2]"), output and logs.
  std::string fixture;
  // Added to each rank's environment (kExec ranks read their set-up there).
  std::vector<std::pair<std::string, std::string>> child_env;
  // Per rank: its CUDA_VISIBLE_DEVICES; empty: the ranks inherit it.
  std::vector<std::string> visible_devices;
  // When the ranks own GPUs: who owns which ("rank 0: 3, rank 1: 5 (CTest
  // resource groups)"), and the DISTTEST_GPUS value ("3,5") that gives a
  // rerun the same ones.
  std::string gpus;
  std::string gpus_rerun;
};

// "[rank 1/4]", or "[SavedShards rank 1/2]" for a fixture's rank.
std::string RankLabel(const TestSpec& spec, int rank);

// Everything the parent learned about one rank.
struct RankReport {
  int rank = 0;
  std::vector<RankMessage> results;    // In arrival order; no kDone.
  std::optional<RankVerdict> done;     // The kDone verdict, if it came.
  std::optional<RankOutcome> outcome;  // How it ended; empty if unknown.
  std::string not_started;             // Why the rank was never started.
  std::string killed_because;          // Set when the harness killed the rank.
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

struct Finding {
  // kProperty: a RecordProperty() of a rank, message its key ("rank1.key")
  // and value its value.
  enum class Kind { kFailure, kFatalFailure, kSkip, kNote, kProperty };
  Kind kind = Kind::kFailure;
  std::string file;
  int line = 0;
  std::string message;
  std::string value;
};

// Whether a rank's own part of the test went wrong: it was not started,
// was killed or overran, reported no pass or skip, reported a failure, or
// not all of its results could be read.
bool RankFailed(const RankReport& r);

// How disttest says it killed a rank after another one failed: "was killed
// by disttest: still running 2000 ms after rank 3 failed".
inline constexpr std::string_view kStillRunningAfter = "still running";
// "rank 5 could not be started": why the ranks started before it were killed.
inline constexpr std::string_view kCouldNotBeStarted = "could not be started";
// Added to the reason of a kill of a rank found stopped.
inline constexpr std::string_view kWasStopped = "it was stopped, not running";
// Whether a failure's text says that it follows from another rank's: a
// collective that a peer broke (the host arena's errors), or a kill after a
// peer's failure. The verdict lists these after the failures they follow.
bool FollowsFromAnother(std::string_view text);

// A rank's first GTEST_SKIP(), or null when it skipped none.
const RankMessage* FirstSkip(const RankReport& r);

// When ranks were stuck, or a collective did not complete on every rank:
// the paragraph that says which (collective_report.h), from the ranks'
// ledgers and stacks; "" otherwise. The verdict of a failed test starts
// with it.
std::string CollectiveParagraph(const TestSpec& spec,
                                const std::vector<RankReport>& ranks);

std::vector<Finding> Judge(const TestSpec& spec,
                           const std::vector<RankReport>& ranks);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_VERDICT_H_
