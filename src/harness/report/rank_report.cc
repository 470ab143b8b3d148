// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/rank_report.h"

namespace disttest::internal {

bool EndedAsExpected(const RankReport& r) {
  return r.expected_end && !r.done && r.outcome && r.killed_because.empty() &&
         r.overran.empty() && r.not_started.empty() &&
         r.expected_end->Matches(*r.outcome);
}

bool RankFailed(const RankReport& r) {
  if (!r.killed_because.empty() || !r.not_started.empty() ||
      !r.overran.empty() || !r.channel_errors.empty() || r.sanitizer) {
    return true;
  }
  if (r.expected_end) {
    // Its end is judged against the expected one; what it reported before
    // still counts.
    return !EndedAsExpected(r) || ReportedAFailure(r);
  }
  if (!r.done || !Succeeded(*r.done)) return true;
  return ReportedAFailure(r);
}

bool ReportedAFailure(const RankReport& r) {
  for (const RankMessage& m : r.results) {
    if (m.kind == RankMessage::Kind::kFatalFailure ||
        m.kind == RankMessage::Kind::kNonFatalFailure) {
      return true;
    }
  }
  return false;
}

const RankMessage* FirstSkip(const RankReport& r) {
  for (const RankMessage& m : r.results) {
    if (m.kind == RankMessage::Kind::kSkip) return &m;
  }
  return nullptr;
}

}  // namespace disttest::internal
