// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Supervisor: runs one distributed test from the parent's side.
//
//   Supervisor sup(spec, MakeLauncher(spec.options.launch, entry));
//   std::vector<RankReport> ranks = sup.Run();
//   std::vector<Finding> verdict = Judge(spec, ranks);
//
// Run() binds the store on MASTER_ADDR port 0 (kept open until the test
// ends, so no other process can take the port), creates one result queue
// per rank, spawns the ranks, and then serves everything from one
// single-threaded poll loop: store requests, the ranks' output pipes, their
// exits (pidfds) and, on a short tick, their result queues.
//
// Why the parent serves the store itself rather than rank 0: the parent
// forks, so it must not run threads; it outlives every rank, so no rank has
// to come up first and a dead rank 0 cannot take the store with it; and the
// parent sees every request, which is where hang diagnosis belongs.
//
// When a rank ends in anything but a pass, the others get
// options.failure_grace to finish, then are killed (they may be blocked in a
// collective that cannot complete). At options.timeout every live rank is
// killed; a rank that skipped gives them five times as long, since skipping
// ranks usually all skip at once. At options.timeout every live rank is
// killed. Nothing outlives Run(): at the end the test's process group is
// killed, every child is reaped, processes the ranks started that were
// handed to this process (a child subreaper) are ended with a note, every
// queue removed, every socket and pipe closed, also when Run() throws.
#ifndef DISTTEST_SRC_HARNESS_SUPERVISOR_H_
#define DISTTEST_SRC_HARNESS_SUPERVISOR_H_

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "disttest/comm/host_arena.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/emergency_cleanup.h"
#include "harness/launcher.h"
#include "harness/output_relay.h"
#include "harness/result_channel.h"
#include "harness/verdict.h"

namespace disttest::internal {

class Supervisor {
 public:
  Supervisor(TestSpec spec, std::unique_ptr<Launcher> launcher);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the test to the end; throws ConfigError for an invalid spec (before
  // anything is started) and Error when the harness itself cannot work.
  std::vector<RankReport> Run();

  // Pooled ranks (options().reuse_workers): the first call spawns the ranks,
  // which run `spec`; each later call hands them the next test through the
  // store ("disttest/pool/<n>" = its name). A test ends when every rank has
  // reported its verdict. When every rank passed or skipped, the ranks stay
  // (parked, waiting for the next test); otherwise they are ended as Run()
  // ends them and alive() turns false.
  std::vector<RankReport> RunPooled(const TestSpec& spec);
  bool alive() const { return alive_; }
  // Tells parked ranks to leave (they reset their connections, so that no
  // TIME_WAIT is left); FinishShutdown() then serves the store while they
  // meet, for 2 s at most, ends and reaps them and removes the queues.
  void RequestShutdown();
  void FinishShutdown();
  // The parent's descriptors that serve these ranks: any other process the
  // parent forks must close them.
  void AppendDescriptors(std::vector<int>* fds) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    pid_t pid = -1;
    int pidfd = -1;
    // Exited: its end was seen (waitid with WNOWAIT) but the process is kept
    // as a zombie until CleanUp, so that rank 0's pid, which names the
    // process group, cannot be reused while the group may still be killed.
    bool exited = false;
    bool reaped = false;
    bool channel_broken = false;
    std::FILE* log = nullptr;  // DISTTEST_LOG_DIR: the rank's whole output.
    std::unique_ptr<OutputRelay> out;
    std::unique_ptr<OutputRelay> err;
    std::unique_ptr<ResultChannel> channel;
    RankReport report;
  };

  static void RemoveStaleQueuesOnce();
  // The test's deadline, heartbeat and grace, from now.
  void StartClock();
  // The store, one result queue per rank, the logs and the ranks.
  void StartRanks();
  // Ends every rank (and what it started), reaps them, collects the last
  // output and results, and cleans up; returns their reports.
  std::vector<RankReport> EndRanks(const std::string& reason);
  void Validate() const;
  void OpenLogs();
  // "Suite.Name/2ranks", or "... (its fixture SavedShards)".
  std::string Subject() const;
  void PrintHeartbeat(Clock::time_point now);
  void SpawnAll();
  void SpawnRank(int r);
  void Supervise();
  int PollTimeoutMs(Clock::time_point now) const;
  void DrainChannels();
  void ObserveExits();
  void OnRankEnded(Rank& rank);
  // Takes the stacks of the ranks still running, then kills them. At the
  // test's `deadline` the ranks still running have overrun it, whatever
  // they do while the stacks are taken.
  void KillStuck(const std::string& reason, bool deadline);
  void KillRemaining(const std::string& reason);
  void CleanUp();
  void ReapAll();
  // Ends the processes of this test's ranks that were handed to this
  // process (a subreaper) when a rank ended, naming each.
  void EndOrphans();
  // Pooled: true once every rank waits for the next test in the store;
  // false when one leaves instead (its communicator failed) or none of
  // that happens within a few seconds.
  bool AwaitParked();
  bool AnyRunning() const;

  TestSpec spec_;
  std::unique_ptr<Launcher> launcher_;
  std::string store_token_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<EmergencyCleanup> emergency_;
  // The ranks' small collectives (DISTTEST_NO_HOST_ARENA=1 turns it off).
  // A rank that ends breaks every wait in it.
  std::shared_ptr<HostArena> arena_;
  std::vector<Rank> ranks_;
  pid_t pgid_ = 0;
  Clock::time_point start_;
  Clock::time_point deadline_;
  std::chrono::milliseconds heartbeat_{0};  // 0: no progress lines.
  Clock::time_point next_heartbeat_;
  std::optional<Clock::time_point> grace_deadline_;
  std::string grace_reason_;
  // Pooled: a test ends with the verdicts, not the exits.
  bool pooled_ = false;
  bool alive_ = false;
  bool shutting_down_ = false;
  int dispatched_ = 0;             // Tests handed to the parked ranks so far.
  bool resource_trouble_ = false;  // Ranks ended: the store could not accept.
  std::vector<std::string> queue_names_;
  // Ranks write a byte to [1] after each result they queue; the poll loop
  // wakes on [0] and drains the queues at once.
  int results_ready_[2] = {-1, -1};
  // MASTER_PORT for the code under test: bound (SO_REUSEADDR) and never
  // listened on, so that no other process takes it while rank 0's code
  // may bind it (torch's env://, launch_from_env()). The harness's store
  // is on a port of its own.
  int master_port_fd_ = -1;
  int master_port_ = 0;
  // Between StartRanks and CleanUp; the parent's children before the ranks.
  bool started_ = false;
  std::set<pid_t> children_before_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SUPERVISOR_H_
