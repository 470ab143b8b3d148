// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// ThreadSanitizer's reports in a rank, read from the runtime as it makes
// them (not from the output): each is noted for the thread whose access
// found it, and after that thread's test body becomes its rank's failure,
// naming the threads of both accesses (by rank, where they are ranks'
// threads) and both stacks.
//
//   // A rank, after its body (nothing without ThreadSanitizer):
//   if (auto races = RacesOfThisRank()) report(failure, *races);
//   // The host of rank threads, after joining them: what no rank took.
//   for (auto& [rank, text] : RacesNoRankTook()) ReportTo(rank, text);
//
// Rank threads are named "rank N" (NameThisRankThread), which ThreadSanitizer
// keeps with each thread: "rank 2 writes ... rank 1 wrote before".
#ifndef DISTTEST_SRC_HARNESS_REPORT_RACE_REPORT_H_
#define DISTTEST_SRC_HARNESS_REPORT_RACE_REPORT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace disttest::internal {

// Whether this program runs under ThreadSanitizer.
bool ThreadSanitizerRuns();

// Empty, or why the program cannot run its tests as it is: it runs under
// ThreadSanitizer but disttest was built without it (ThreadSanitizer cannot
// see disttest's own synchronization, and would call it races in every
// rank's code).
std::string WhyNotUnderThisSanitizer();

// Names the calling thread "rank N" (what gdb, top and ThreadSanitizer's
// reports show).
void NameThisRankThread(int rank);

// ThreadSanitizer's reports that this rank has not yet been told of, as one
// failure's text; nullopt with none. A rank thread takes the reports its
// own accesses or its threads' found, or that name its thread; a rank
// process (one rank), and the test's own process, all of them.
std::optional<std::string> RacesOfThisRank();

// The reports no rank took (found by a thread that is no rank's, or after
// its rank's check), each with the rank to tell: the rank whose thread (or
// a thread it started) found it, else the rank of either access, else 0.
std::vector<std::pair<int, std::string>> RacesNoRankTook();

// Whether ThreadSanitizer made reports in this process (or its parent,
// before a fork) and each of this process's was told to a rank: then the
// process's exit status need not say it again (ThreadSanitizer's exitcode,
// 66, which its _exit() would put in place of the status).
bool EveryRaceWasTold();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_RACE_REPORT_H_
