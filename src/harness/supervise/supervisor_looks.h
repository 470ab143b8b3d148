// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// When the supervisor looks at the ranks' calls: the run (supervisor.cc)
// schedules the looks that supervisor_deadlock.cc makes.
#ifndef DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_LOOKS_H_
#define DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_LOOKS_H_

#include <chrono>

namespace disttest::internal {

// How often the parent looks for ranks that wait in a collective that
// others entered with another call, and how long a rank must have waited
// for a look at every rank's calls (a few microseconds a rank).
inline constexpr std::chrono::milliseconds kMatchEvery(250);
inline constexpr std::chrono::milliseconds kMatchAfter(200);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_LOOKS_H_
