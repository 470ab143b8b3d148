// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The host of ranks that are threads (LaunchMode::kThreads): one process,
// forked by the supervisor for one test, runs every rank of the test as a
// thread of its own, each through RunRank (run_rank.h) like a spawned rank:
//
//   NoteThreadRankChannels(channels);         // parent, before it forks
//   RunThreadRanks(make, options, arena, file, line);   // the fork
//   LeaveThreadRanks();
//
// Each thread makes its rank's program (its own fixture object) with
// `make`, in the thread, and has its own result queue (the parent mapped
// one per rank before it forked), store client, communicator, ledger area
// and the per-rank state of the runtime (base/threads.h). Why one process
// per test and not a pool: docs/how-it-works.md#ranks-as-threads.
#ifndef DISTTEST_SRC_HARNESS_RANK_THREAD_RANK_HOST_H_
#define DISTTEST_SRC_HARNESS_RANK_THREAD_RANK_HOST_H_

#include <functional>
#include <memory>
#include <vector>

#include "comm/host_arena.h"
#include "disttest/harness/options.h"
#include "harness/channel/result_channel.h"
#include "harness/rank/run_rank.h"

namespace disttest::internal {

// Makes rank `rank`'s program, in its thread; may throw (a fixture's
// constructor), and null means the test cannot be made.
using ProgramMaker = std::function<std::unique_ptr<RankProgram>(int rank)>;

// Runs every rank of the test as a thread of this process and returns when
// every thread has reported its verdict and ended; the caller then ends
// the process with LeaveThreadRanks(). `arena`: the host arena the process
// inherited mapped (null: none); `file`, `line`: where harness failures are
// reported.
void RunThreadRanks(const ProgramMaker& make, const Options& options,
                    std::shared_ptr<HostArena> arena, const char* file,
                    int line);
// Ends the process of rank threads: what they started and left running,
// then _exit(0) (each rank's verdict went with its results).
[[noreturn]] void LeaveThreadRanks();

// In the parent, before it forks the process of a test's rank threads:
// each rank's result queue, in rank order (the fork has them mapped).
void NoteThreadRankChannels(std::vector<ResultChannel*> channels);

// Sends `m` as rank `rank`'s result, from any thread of the process (a
// failure in a thread that a rank started, which no rank owns).
void ReportForThreadRank(int rank, const RankMessage& m);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_THREAD_RANK_HOST_H_
