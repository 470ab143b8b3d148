// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankSpawner: starts one rank process. ForkSpawner (LaunchMode::kFork) runs
// the rank in a fork of the test process; ExecSpawner (LaunchMode::kExec)
// re-executes the test binary, filtered to this test, as the rank.
//
//   auto spawner = MakeSpawner(LaunchMode::kFork, [&](auto arena) {...});
//   pid_t pid = spawner->Spawn(request);
//
// Both differ only in RunChild(); the base class does what every rank needs
// between fork() and the rank's code: join the test's process group, die with
// the parent (PR_SET_PDEATHSIG), route stdout/stderr into the parent's pipes
// and close the parent's descriptors. Between fork and exec only raw system
// calls run; ExecSpawner builds argv and envp before forking.
// Fork caveat: the parent must be single-threaded when it forks (kFork).
#ifndef DISTTEST_SRC_HARNESS_SPAWN_RANK_SPAWNER_H_
#define DISTTEST_SRC_HARNESS_SPAWN_RANK_SPAWNER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/host_arena.h"
#include "comm/ledger.h"
#include "disttest/env/rank_env.h"
#include "disttest/harness/options.h"
#include "harness/channel/result_channel.h"
#include "harness/rank_outcome.h"

namespace disttest::internal {

struct SpawnRequest {
  RankEnv rank;
  std::string test_name;     // Full gtest name: "Suite.Name/2ranks".
  std::string result_queue;  // Name of the rank's ResultChannel.
  std::string store_token;   // What the rank presents to the store.
  // More variables for the rank (the set-up a kExec rank cannot inherit).
  std::vector<std::pair<std::string, std::string>> extra_env;
  int stdout_fd = -1;  // Write ends of the parent's pipes.
  int stderr_fd = -1;
  pid_t pgid = 0;                   // 0: the child leads a new group.
  std::vector<int> close_in_child;  // Parent-owned descriptors.
  // And every descriptor from this one up (-1: none), after the child has
  // put its output in place: its siblings' pipes and pidfds.
  int close_from = -1;
  // The ranks' host arena, or null. A forked rank gets it from the entry's
  // argument; a re-executed one keeps its descriptor across exec and maps
  // it.
  std::shared_ptr<HostArena> arena;
  // The ranks' collective ledgers (comm/ledger.h): a forked rank installs
  // its area of the inherited mapping; a re-executed one keeps the
  // descriptor across exec and maps it.
  std::shared_ptr<LedgerMemory> ledger;
  // The write end of the parent's results-ready pipe (-1: none), kept
  // across exec.
  int results_ready_fd = -1;
  // The parent's end of the rank's result queue, already mapped: a forked
  // rank sends through its copy instead of opening the queue by name
  // (ResultChannel::Inherited()).
  ResultChannel* channel = nullptr;
};

// Whether a forked child can close every descriptor from a number up in
// one call (SpawnRequest::close_from); otherwise each is listed.
bool CanCloseFrom();

// Why a rank's end is unknown when other code of the test process reaped it
// (a SIGCHLD handler, a wait()): disttest waits with WNOWAIT, reaps last.
inline constexpr std::string_view kReapedByOthers =
    "was reaped by other code in the test process (a SIGCHLD handler, or a "
    "wait() or waitpid(-1) the test or a library made), so how it ended is "
    "unknown; reap only the children you started, by their id";

class RankSpawner {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~RankSpawner() = default;
  // Starts the rank and returns its pid; throws SpawnError.
  virtual pid_t Spawn(const SpawnRequest& request);

  // What the parent does to the processes it started, all through here, so
  // that a fake spawner can stand in for processes in the supervisor's unit
  // tests (tests/harness/fake_spawner.h):
  // A descriptor that polls readable once `pid` has ended; -1: none (the
  // poll loop's tick notices the end).
  virtual int OpenPidFd(pid_t pid);
  // How `pid` ended, once it has; it stays a zombie until Reap. Sets
  // `error` when it cannot be waited for (someone else reaped it).
  virtual std::optional<RankOutcome> Ended(pid_t pid, std::string* error);
  // Reaps `pid`, waiting until `deadline` at most; nullopt when it could
  // not be reaped (stuck in uninterruptible sleep).
  virtual std::optional<RankOutcome> Reap(pid_t pid,
                                          Clock::time_point deadline);
  // SIGKILL to `pid`, and to the process group `pgid`.
  virtual void Kill(pid_t pid);
  virtual void KillGroup(pid_t pgid);
  // Whether `pid` is stopped (SIGSTOP, SIGTSTP, a tracer), not running.
  virtual bool Stopped(pid_t pid);
  // The stacks of `pids`, one string each (stack_dump.h).
  virtual std::vector<std::string> Stacks(const std::vector<pid_t>& pids,
                                          std::chrono::milliseconds deadline);

 protected:
  // Runs in the parent before fork(): allocate what the child needs.
  virtual void Prepare(const SpawnRequest& /*request*/) {}
  // Runs in the child; never returns. An exception is caught by the caller
  // and ends the child with kExitHarnessError.
  [[noreturn]] virtual void RunChild(const SpawnRequest& request) = 0;

 private:
  [[noreturn]] void StartChild(const SpawnRequest& request, pid_t parent,
                               int keeper_slot);
};

// The rank's code, run in the forked child (kFork only), given the host
// arena it inherited mapped (null: none).
using RankEntry = std::function<void(std::shared_ptr<HostArena> arena)>;

std::unique_ptr<RankSpawner> MakeSpawner(LaunchMode mode, RankEntry fork_entry);

// Warns on stderr when this process runs more than one thread: a forked rank
// has only the forking thread, and locks the others held stay locked.
void WarnIfThreaded(const std::string& test_name);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SPAWN_RANK_SPAWNER_H_
