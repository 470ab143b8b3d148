// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The paragraph a hung or broken distributed test starts with: which
// collective did not complete, which ranks are in it, which are not and
// where they are instead, read from the ranks' collective ledgers
// (comm/ledger.h).
//
//   std::string text = CollectiveReport(states);
//   // collective #17 on the world communicator never completed:
//   //   ranks 0-2 (3 ranks) are in allreduce(8 x float32, sum) at
//   //     model_test.cc:42, for 30.0 s
//   //   rank 3 is not in it: its last collective, #16 broadcast(16 x
//   //     int32, root 0) at model_test.cc:57, completed 29.8 s ago; it is
//   //     now at model_test.cc:88 (stack below)
//
// Per communicator (matched across ranks by key; "world" first): the
// first collective that some rank entered and not every rank completed.
// Ranks whose entries of it differ (another operation, count, type, reduce
// op or root) make it "does not match across the ranks". Ranks are grouped
// where everything but the times reads the same; times of a group print as
// a range. A rank that is in no collective but in a send or receive is
// named with it; when no collective is incomplete, the ranks' last
// collectives and open transfers are listed instead.
#ifndef DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_REPORT_H_
#define DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.h"

namespace disttest::internal {

// What is known of one rank when the report is made.
struct RankState {
  int rank = 0;
  std::optional<RankLedgerView> ledger;  // Empty: it could not be read.
  // How it ended ("killed by signal 9 (SIGKILL)", "exited with status 1");
  // empty while it runs (or ran when its ledger was read).
  std::string ended;
  // Where its stack says it is ("model_test.cc:88"), or empty.
  std::string now_at;
  bool stack = false;  // Its stack is in the report, below.
  // It ended as the test expected (ExpectRankToEnd): the calls it made
  // before are not compared with its survivors'.
  bool ended_as_expected = false;
};

// The paragraph, lines joined by '\n' (no trailing one); "" when no rank
// has a ledger with an operation in it. At most `max_lines` lines (then a line
// saying how many more groups there are).
std::string CollectiveReport(const std::vector<RankState>& ranks,
                             std::size_t max_lines = 40);

// Ranks whose collectives on a communicator all returned but whose calls
// differed (their ledgers' digests): a broken program that no wait caught
// (different reduce ops, counts that the transport did not check). "" when
// they agree; else, for each such communicator, the first collective that
// differs and what each rank called:
//   collective #1 on the world communicator did not match across the ranks,
//   though every call returned (the data is not what the test meant):
//     rank 0 called allreduce(8 x float32, sum) at model_test.cc:42
//     rank 1 called allreduce(8 x float32, max) at model_test.cc:42
std::string MismatchedCalls(const std::vector<RankState>& ranks);

// Messages that were not received as they were sent, on a communicator
// whose every rank's ledger was read: the balances of their sends and
// receives that returned (CommTransfers) do not sum to 0. A transport that
// neither tags nor types its messages (NCCL) delivers a send of 8 floats
// to a receive of 8 int32s, and completes a small send nobody receives.
// "" when they pair; else, for each such communicator, the first message
// that did not, as the ledgers kept it:
//   the sends and receives on the world communicator did not pair, though
//   every one returned:
//     the 1st message from rank 0 to rank 1 with tag 0 was sent as send(8 x
//     float32 to rank 1, tag 0) at model_test.cc:42 and received as recv(8
//     x int32 from rank 0, tag 0) at model_test.cc:45: the data is not what
//     the test meant
std::string UnpairedMessages(const std::vector<RankState>& ranks);

// A rank as a report names it on a communicator whose ranks may be
// numbered otherwise: "rank 3", or "rank 3 (rank 1 there)".
std::string RankThere(int world, int there);

// "the 2nd message from rank 0 to rank 1 with tag 3": message number `seq`
// (from 0) of its pair, the order in which they pair; `from` and `to` as
// RankThere names them.
std::string MessageHead(std::uint64_t seq, const std::string& from,
                        const std::string& to, std::uint32_t tag);

// How a report names communicator `name`: "the world communicator",
// "the unnamed communicator", `communicator "mine"`, "tensor group 0".
std::string CommTitle(const std::string& name);

// The first collective (by number) that ranks entered with different
// calls while one of them is still in it, which therefore cannot complete
// as the test meant: "collective #3 on communicator "mine" does not match
// across the ranks"; "" when there is none. The parent asks while ranks
// wait, so that they fail at once rather than at the timeout.
std::string OpenMismatch(const std::vector<RankLedgerView>& views);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_REPORT_H_
