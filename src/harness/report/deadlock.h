// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Ranks that wait for each other, none able to go on: a deadlock, found in
// the ranks' ledgers while they wait, so that the test fails within about a
// second instead of at its timeout.
//
//   std::string found = FindDeadlock(views, still);
//   // "ranks 0-1 wait for each other and none can go on (a deadlock):
//   //  rank 0 waits in send(1 x int32 to rank 1, tag 1) at t.cc:12, which
//   //  rank 1 has posted no receive for; rank 1 waits in recv(1 x int32
//   //  from rank 0, tag 2) at t.cc:20, which rank 0 has not sent"
//
// A rank waits for another when it is in a blocking call (a send, a
// receive, a request's wait, a collective) that cannot complete before the
// other calls something more:
//   - a send, when the peer has posted fewer receives from it of that tag,
//     element type and count than it has made such sends (messages of one
//     such kind pair in order);
//   - a receive, when the peer has made fewer such sends to it than it has
//     posted receives;
//   - a collective, for each member of its communicator that is not in it.
// Ranks that each wait only for others of them, or for ranks that have
// finished their test (and will call nothing more), and that have not moved
// since the reader's last look (`still`), never will. Every communicator,
// whatever made it, is seen the same way: the ledger has them all.
//
// The supervisor declares one only when it finds it at two looks in a row
// and the ranks' processes spent no CPU time in between (supervisor.h).
//
// Certain or nothing: a rank whose test's calls came from several threads
// (another may yet call), whose ledger has dropped older entries of the
// test that the counts need, or whose peer no ledger names, is taken as
// one that may go on (and so, by the supervisor, one whose call has a
// timeout the test shortened or gives up by itself within 2 s).
#ifndef DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_
#define DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_

#include <string>
#include <vector>

#include "comm/ledger.h"

namespace disttest::internal {

// The first cycle of ranks that wait for each other among `views` (every
// rank of the test, one view each), of those whose `still` is true, or
// chain of them that ends at a rank whose `finished` is true, as above;
// "" when there is none.
std::string FindDeadlock(const std::vector<RankLedgerView>& views,
                         const std::vector<bool>& still,
                         const std::vector<bool>& finished);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_
