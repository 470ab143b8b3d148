// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DISTTEST_TRACE=dir: a Chrome trace event file per distributed test
// (Perfetto and chrome://tracing open it), from what the parent knows when
// the test has ended: when it started each rank, the phases and every
// operation in each rank's collective ledger, each failure as it came.
//
//   if (TraceWanted()) {
//     std::string path = WriteTrace(spec, reports);  // throws ConfigError
//     ...  // a failing test prints it
//   }
//
// One process per test ("Suite.Name/4ranks"), one track per rank ("rank
// 2"): spans "start" (fork to the rank's first line of harness code),
// "connect", "set-up", "body", "tear-down", "end" (to its exit), one span
// per operation (name "allreduce(8 x float32, sum)", arguments: its number,
// communicator, caller and state; one that did not complete ends where the
// ledger was read), and an instant event per failure. Times are
// microseconds from the first rank's start. With DISTTEST_TRACE a rank keeps
// its last kTraceRing operations (not kRing).
#ifndef DISTTEST_SRC_HARNESS_REPORT_TRACE_H_
#define DISTTEST_SRC_HARNESS_REPORT_TRACE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "harness/report/rank_report.h"
#include "harness/spec.h"

namespace disttest::internal {

inline constexpr std::size_t kTraceRing = 4096;

// Whether DISTTEST_TRACE names a directory.
bool TraceWanted();

// The trace of the test, as JSON.
std::string TraceJson(const TestSpec& spec,
                      const std::vector<RankReport>& ranks);

// Writes it to <DISTTEST_TRACE>/<Suite>.<Name>.<N>ranks.trace.json (a
// fixture's: <...>.<Fixture>.trace.json), making the directory; returns the
// path. Throws ConfigError naming the variable and the path when it cannot.
std::string WriteTrace(const TestSpec& spec,
                       const std::vector<RankReport>& ranks);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_TRACE_H_
