// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Where the ranks are threads of one process (LaunchMode::kThreads), a
// communicator is made in a rank's own thread: one made in a thread that no
// rank runs would be nobody's, and its calls compared with nobody's.
#ifndef DISTTEST_SRC_COMM_RANK_THREAD_CHECK_H_
#define DISTTEST_SRC_COMM_RANK_THREAD_CHECK_H_

#include <string>

namespace disttest::internal {

// Throws CommError ("[rank 1/2] <what>: made in a thread that no rank
// runs ...") in a thread no rank runs of a process whose ranks are
// threads; returns elsewhere. Called before any rank connects.
void RefuseOutsideARankThread(int rank, int size, const std::string& what);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_RANK_THREAD_CHECK_H_
