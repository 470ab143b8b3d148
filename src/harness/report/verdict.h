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
#ifndef DISTTEST_SRC_HARNESS_REPORT_VERDICT_H_
#define DISTTEST_SRC_HARNESS_REPORT_VERDICT_H_

#include <string>
#include <string_view>
#include <vector>

#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal {

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

// How disttest says it killed a rank after another one failed: "was killed
// by disttest: still running 2000 ms after rank 3 failed".
inline constexpr std::string_view kStillRunningAfter = "still running";
// "rank 5 could not be started": why the ranks started before it were killed.
inline constexpr std::string_view kCouldNotBeStarted = "could not be started";
// Added to the reason of a kill of a rank found stopped.
inline constexpr std::string_view kWasStopped = "it was stopped, not running";

// When ranks were stuck, or a collective did not complete on every rank:
// the paragraph that says which (collective_report.h), from the ranks'
// ledgers and stacks; "" otherwise. The verdict of a failed test starts
// with it.
std::string CollectiveParagraph(const TestSpec& spec,
                                const std::vector<RankReport>& ranks);

std::vector<Finding> Judge(const TestSpec& spec,
                           const std::vector<RankReport>& ranks);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_VERDICT_H_
