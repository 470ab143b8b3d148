// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Ranks that wait for each other, none able to go on (a deadlock), found in
// the ranks' ledgers while they wait, so that the test fails within about a
// second instead of at its timeout. Who waits for whom, and when a rank is
// taken as one that may go on: docs/how-it-works.md#deadlocks.
#ifndef DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_
#define DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_

#include <string>
#include <vector>

#include "comm/ledger.h"

namespace disttest::internal {

// The first cycle of ranks that wait for each other among `views` (every
// rank of the test, one view each), of those whose `still` is true, or
// chain of them that ends at a rank whose `finished` is true
// (docs/how-it-works.md#deadlocks); "" when there is none.
std::string FindDeadlock(const std::vector<RankLedgerView>& views,
                         const std::vector<bool>& still,
                         const std::vector<bool>& finished);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_DEADLOCK_H_
