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
#ifndef DISTTEST_SRC_HARNESS_RANK_RANK_CONTROL_H_
#define DISTTEST_SRC_HARNESS_RANK_RANK_CONTROL_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "comm/ledger.h"
#include "harness/expected_end.h"
#include "harness/rank/run_rank.h"

namespace disttest::internal {

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

  // Throws ConfigError for a rank out of range, a signal that is none, an
  // exit status that is disttest's own, or an end other than one this rank
  // declared for that rank before (a rank ends one way).
  void Expect(int rank, const ExpectedEnd& end);
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
  std::mutex mu_;
  std::map<int, ExpectedEnd> declared_;  // By rank; under mu_.
};

// The rank control of this process's rank part; null outside one, and in
// an external launcher's ranks.
RankControl* CurrentRankControl();
void SetRankControl(RankControl* control);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_RANK_CONTROL_H_
