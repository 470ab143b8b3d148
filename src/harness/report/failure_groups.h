// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The failures of a test's ranks, grouped: the same failure (kind,
// file:line and text, the rank's own label taken out) of several ranks is
// one finding, "[ranks 0-15, 17-255 of 256] ..."; values that differ by rank
// at one line are one finding with a table; root causes first, in the order
// they came, what followed from them after, the first marked as the first.
//
//   std::vector<FailureItem> items = ...;   // each rank's, the verdict's
//   AddFailures(spec, std::move(items), &findings);
#ifndef DISTTEST_SRC_HARNESS_REPORT_FAILURE_GROUPS_H_
#define DISTTEST_SRC_HARNESS_REPORT_FAILURE_GROUPS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/verdict.h"
#include "harness/spec.h"

namespace disttest::internal {

// One failure (or property) of one rank, before the ranks' are grouped.
struct FailureItem {
  Finding::Kind kind;
  std::string file;
  int line = 0;
  int rank = 0;
  std::string text;   // Without the "[rank r/N] " label.
  std::string value;  // A property's value.
  std::optional<std::chrono::steady_clock::time_point> at;
  // It follows from another rank's failure (RankMessage::follows,
  // RankReport::killed_for and was_stopped): listed after the others.
  bool follows = false;
};

// "[rank 3/4]", "[ranks 0-2, 5 of 8]" (with the fixture's name, if any).
std::string GroupLabel(const TestSpec& spec, const std::vector<int>& ranks);

// The failures of every rank: identical ones once with their ranks, in the
// order they came where that is known, the first marked as the first.
void AddFailures(const TestSpec& spec, std::vector<FailureItem> items,
                 std::vector<Finding>* out);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_FAILURE_GROUPS_H_
