// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// ExpectedEnd: how a rank's body said a rank will end (ExpectRankToEnd: a
// signal, an exit status), and its text in a kExpectEnd message. The
// verdict holds a rank's end against it (rank_control.h declares it).
#ifndef DISTTEST_SRC_HARNESS_EXPECTED_END_H_
#define DISTTEST_SRC_HARNESS_EXPECTED_END_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "harness/rank_outcome.h"

namespace disttest::internal {

// How a rank is expected to end: killed by `value` (a signal), or exiting
// with status `value`, before its verdict.
struct ExpectedEnd {
  bool signal = true;
  int value = 0;
  int declared_by = -1;  // The rank that declared it (the parent's view).
  // When it was declared, CLOCK_MONOTONIC in ns (0: not known), so that the
  // parent can tell a declaration that came after the end it names.
  std::int64_t declared_ns = 0;
  // The declaring rank saw the rank ended already when it declared.
  bool after_end = false;

  // "be killed by signal 9 (SIGKILL)", "exit with status 3".
  std::string str() const;
  bool Matches(const RankOutcome& o) const;
  bool SameEnd(const ExpectedEnd& other) const {
    return signal == other.signal && value == other.value;
  }
};

// A kExpectEnd message's text: "2 signal 9 <declared_ns>", "1 exit 3
// <declared_ns>", with " ended" when the declaring rank saw it ended
// already. Decode gives the rank and the end back, or nullopt for anything
// else.
std::string EncodeExpectedEnd(int rank, const ExpectedEnd& end);
std::optional<std::pair<int, ExpectedEnd>> DecodeExpectedEnd(
    std::string_view text);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_EXPECTED_END_H_
