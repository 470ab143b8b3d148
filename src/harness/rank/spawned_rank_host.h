// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The host of a spawned rank: a process of its own that the supervisor
// forked or re-executed for one test (or, pooled, for a run of them).
//
//   RunSpawnedRank(program, options, forked_arena);   // never returns
//
// What it adds to RunRank: results to the rank's shared-memory queue
// (DISTTEST_INTERNAL_RESULT_QUEUE), collectives through the host arena, a
// wait for a debugger (DISTTEST_DEBUG_RANK), the pool's next tests
// (worker_pool.h), a meeting of every rank at the end, the processes the
// test left running ended, and _exit with the verdict's exit code.
#ifndef DISTTEST_SRC_HARNESS_RANK_SPAWNED_RANK_HOST_H_
#define DISTTEST_SRC_HARNESS_RANK_SPAWNED_RANK_HOST_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/host_arena.h"
#include "disttest/harness/options.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/rank/run_rank.h"

namespace disttest::internal {

// Runs `program` as a spawned rank and ends the process. `forked_arena` is
// the host arena a forked rank inherited mapped (null: none, or a
// re-executed rank, which maps it from the descriptor it kept).
[[noreturn]] void RunSpawnedRank(RankProgram& program, const Options& options,
                                 std::shared_ptr<HostArena> forked_arena);

// Whether RunSpawnedRank (or RunThreadRanks) has started in this process
// (it is a rank, or holds ranks).
bool InSpawnedRank();

// What a process of ranks does first (RunSpawnedRank, RunThreadRanks): it
// is a rank from now on, and counts coverage of its own.
void BecomeRankProcess();
// Leaves a process of ranks: stdio flushed, coverage written, _exit.
[[noreturn]] void LeaveRankProcess(int code);
// Whether a debugger (any tracer) is attached to this process.
bool DebuggerAttached();

// The test's store, as a spawned rank or a rank thread connects to it (on
// first use): the harness's own port (`store_port`, from
// DISTTEST_INTERNAL_STORE_PORT) when it is one, else MASTER_PORT.
std::unique_ptr<TcpStore> HarnessStore(const RankEnv& env,
                                       const std::string& store_port,
                                       std::chrono::milliseconds timeout,
                                       const std::string& token);
// The test's world communicator over `store`, through `arena` (null: none),
// NCCL on `device`.
std::unique_ptr<Communicator> WorldCommunicator(
    const RankEnv& env, const Options& options, Store& store,
    std::shared_ptr<HostArena> arena, std::chrono::milliseconds timeout,
    int device);

// In the parent, before it forks ranks: the TCP sockets among `fds` (its
// open descriptors) that they will inherit (a forked rank then need not list
// them itself; a re-executed one does).
void NoteSocketsForkedRanksInherit(const std::vector<int>& fds);

// Tells the parent the rank's verdict, after everything the test printed
// (a pooled rank goes on to another test, whose output must not hold it).
// Sent before the rank meets the others at the end, so that a rank killed
// while it waits there for a stuck peer is judged by what it did, not by
// how it was ended.
void ReportVerdict(const ReportFn& report, RankVerdict verdict);

// Ends the processes `whose` test started and left running, saying so: the
// rank is their subreaper, so a daemon that forked twice and called
// setsid() is still its own. Only once every rank is done with the test
// (after the exit meeting, or when a pooled rank gets its next test): a
// helper one rank started may serve its peers until then.
void EndLeftovers(const char* whose);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_SPAWNED_RANK_HOST_H_
