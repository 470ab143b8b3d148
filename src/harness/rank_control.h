// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What a rank's body may ask about its peers' processes: that a rank's end
// (a signal, an exit code) is expected, for a test of what its survivors
// see; and a signal to a peer, by rank. Only ranks that disttest spawned on
// this host have it (their host installs one for the rank's part); an
// external launcher's ranks have none, and are told so.
//
//   ExpectedEnd end{/*signal=*/true, SIGKILL};
//   CurrentRankControl()->Expect(2, end);  // the parent drains it before
//   CurrentRankControl()->Signal(2, SIGKILL);  // it judges rank 2's end
//
// The expectation travels in the declaring rank's result queue (a kExpectEnd
// message) before the signal or the exit it announces, and the parent reads
// every queue again when it sees a rank end: it never judges an end before
// the expectation that came first.
#ifndef DISTTEST_SRC_HARNESS_RANK_CONTROL_H_
#define DISTTEST_SRC_HARNESS_RANK_CONTROL_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "comm/ledger.h"
#include "harness/rank_main.h"
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

class RankControl {
 public:
  // `pids`: the ranks' ledgers, where each rank wrote its process id (null:
  // none, then Signal() says so).
  RankControl(int rank, int world_size, ReportFn report,
              const LedgerMemory* pids)
      : rank_(rank),
        world_size_(world_size),
        report_(std::move(report)),
        pids_(pids) {}

  // Throws ConfigError for a rank out of range, a signal that is none, or
  // an exit status that is disttest's own.
  void Expect(int rank, const ExpectedEnd& end) const;
  // Throws Error naming the rank when it cannot be signalled (out of range,
  // not started, gone).
  void Signal(int rank, int signal) const;

 private:
  void CheckRank(const char* what, int rank) const;
  // Whether rank `rank`'s process has ended (a zombie or gone), by its pid
  // in the ledger; false when that cannot be told, or for this rank.
  bool HasEnded(int rank) const;

  int rank_;
  int world_size_;
  ReportFn report_;
  const LedgerMemory* pids_;
};

// The rank control of this process's rank part; null outside one, and in
// an external launcher's ranks.
RankControl* CurrentRankControl();
void SetRankControl(RankControl* control);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_CONTROL_H_
