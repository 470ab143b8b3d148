// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What one rank contributes to the verdict (verdict.h) on its own: the
// failures and properties it reported, its channel's errors, its
// sanitizer's report, and how it ended when that is itself a failure (died,
// killed, overran, exited early, not as ExpectRankToEnd said).
//
//   std::vector<FailureItem> items;
//   AddRankResults(spec, rank, /*in_tree=*/false, &items);
#ifndef DISTTEST_SRC_HARNESS_REPORT_RANK_FAILURES_H_
#define DISTTEST_SRC_HARNESS_REPORT_RANK_FAILURES_H_

#include <optional>
#include <string>
#include <vector>

#include "harness/rank_outcome.h"
#include "harness/report/failure_groups.h"
#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal {

// What rank `r`'s exit status says when its final report never came (its
// outcome is known), and in which part of its test it ended, where its
// ledger says that it was past its body.
std::string EndWithoutReport(const RankReport& r);

// Whether a rank that ended as `o` did, last in `phase` (its ledger's; none
// where it has no ledger), ended with disttest's own `status` (kExitFailed,
// kExitSkipped, ...) set by disttest's code: in the test's code (SetUp() to
// TearDown()) such a status is the test's own exit(82), and says nothing of
// disttest.
bool EndedWithDisttestsStatus(const RankOutcome& o, int status,
                              std::optional<RankPhase> phase);

// Rank `r`'s failures and properties, appended to `out` (not its skips or
// passes). `in_tree`: the rank's stack is in the merged tree, not in its
// failure.
void AddRankResults(const TestSpec& spec, const RankReport& r, bool in_tree,
                    std::vector<FailureItem>* out);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_RANK_FAILURES_H_
