// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankVerdict: how one rank's part of a test went, and its one encoding in
// each place it travels: the word a rank's kDone message (or, launched, its
// "done" key) carries, and the exit code a spawned rank ends with.
//
//   RankVerdict v = program.Run(...);
//   _exit(ExitCodeOf(v));                  // 0, 81 or 82
//   report({kDone, "", -1, NameOf(v)});    // "passed", "failed", "skipped"
//   std::optional<RankVerdict> back = ParseRankVerdict("skipped");
//
// Every conversion is here; nothing else spells the words or the codes.
#ifndef DISTTEST_SRC_HARNESS_RANK_VERDICT_H_
#define DISTTEST_SRC_HARNESS_RANK_VERDICT_H_

#include <optional>
#include <string_view>

#include "harness/rank_outcome.h"

namespace disttest::internal {

enum class RankVerdict { kPassed, kFailed, kSkipped };

// "passed", "failed", "skipped": what messages and the store carry, and
// what the verdict's text says ("after reporting that it skipped").
constexpr const char* NameOf(RankVerdict v) {
  switch (v) {
    case RankVerdict::kPassed:
      return "passed";
    case RankVerdict::kSkipped:
      return "skipped";
    case RankVerdict::kFailed:
      break;
  }
  return "failed";
}

// The verdict NameOf() gave `word`; nullopt for any other text.
constexpr std::optional<RankVerdict> ParseRankVerdict(std::string_view word) {
  for (RankVerdict v :
       {RankVerdict::kPassed, RankVerdict::kFailed, RankVerdict::kSkipped}) {
    if (word == NameOf(v)) return v;
  }
  return std::nullopt;
}

// The exit code a rank with this verdict ends with.
constexpr int ExitCodeOf(RankVerdict v) {
  switch (v) {
    case RankVerdict::kPassed:
      return kExitPassed;
    case RankVerdict::kSkipped:
      return kExitSkipped;
    case RankVerdict::kFailed:
      break;
  }
  return kExitFailed;
}

// Whether a verdict lets the test go on (pass or skip, not fail).
constexpr bool Succeeded(RankVerdict v) { return v != RankVerdict::kFailed; }

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_VERDICT_H_
