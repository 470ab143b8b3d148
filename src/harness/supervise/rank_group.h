// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup: the processes of one test's ranks, from the parent's side,
// and everything that serves them: the store (bound on MASTER_ADDR port 0,
// and open until the group ends, so that no other process takes the port),
// one result queue per rank, the output relays and logs, the host arena,
// MASTER_PORT reserved for the code under test, and the emergency clean-up
// that removes the queues if the parent dies.
//
//   RankGroup group(spec, MakeSpawner(spec.options.launch, entry));
//   group.Start();                       // spawns every rank
//   while (...) group.Serve(10);         // one pass of the poll loop
//   std::vector<RankReport> r = group.End("the test ended");
//
// The supervisor (supervisor.h) decides when a test is over and whom to
// kill; the worker pool (worker_pool.h) keeps a group between tests. Nothing
// outlives End() or the destructor: the ranks' process group is killed,
// every child is reaped, processes the ranks started that were handed to
// this process (a child subreaper) are ended with a note, every queue is
// removed, every socket and pipe closed, also when something throws.
#ifndef DISTTEST_SRC_HARNESS_SUPERVISE_RANK_GROUP_H_
#define DISTTEST_SRC_HARNESS_SUPERVISE_RANK_GROUP_H_

#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/host_arena.h"
#include "comm/ledger.h"
#include "disttest/rendezvous/tcp_store.h"
#include "disttest/rendezvous/tcp_store_server.h"
#include "harness/channel/output_relay.h"
#include "harness/channel/result_channel.h"
#include "harness/process/emergency_cleanup.h"
#include "harness/process/resources.h"
#include "harness/report/rank_report.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/spec.h"

namespace disttest::internal {

class RankGroup {
 public:
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
    // A thread of the one process that holds every rank of the test
    // (LaunchMode::kThreads): `pid` is that process, spawned as rank 0's.
    bool thread = false;
    // Why an ExpectRankToEnd() of this rank came too late (after its end),
    // when no declaration came in time: a failure of the rank at End().
    std::string late_expectation;
  };
  // Called for a rank whose verdict (kDone) came, and for one that exited.
  using RankEvent = std::function<void(Rank&)>;

  RankGroup(TestSpec spec, std::unique_ptr<RankSpawner> spawner);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  // Creates everything and spawns the ranks (a rank that cannot be started
  // is reported so, and the ones before it are killed); throws Error when
  // the harness itself cannot work (a resource limit, say).
  void Start();
  // A pooled group's next test: its spec labels output and logs from now
  // on, and its reports start empty (before Start(): only the spec).
  void Relabel(const TestSpec& spec);
  // Relays what the ranks wrote, up to now, and ends a line left open.
  void FinishOutput();
  // One pass of the poll loop, waiting at most `timeout_ms`: store
  // requests, the ranks' output, their results and exits.
  void Serve(int timeout_ms);
  void DrainChannels();
  // Sees which ranks ended; reads every queue again before it judges them.
  void ObserveExits();
  // SIGKILL to every rank still running and to the ranks' process group;
  // `reason` is what a rank killed before its verdict is told, and `why`
  // whose doing that is (RankReport::killed_for).
  void Kill(const std::string& reason,
            RankReport::KilledFor why = RankReport::KilledFor::kItself);
  // Reads every rank's collective ledger into its report (one that has
  // one already keeps it, unless `again`).
  void ReadLedgers(bool again);
  // Kills what runs, reaps, collects the last output and results, cleans
  // up; returns every rank's report (with its ledger when any failed).
  std::vector<RankReport> End(const std::string& reason);
  // Kills, reaps and releases everything; the group can Start() again.
  void CleanUp();

  void OnVerdict(RankEvent f) { on_verdict_ = std::move(f); }
  void OnExit(RankEvent f) { on_exit_ = std::move(f); }
  // Called with each failure a rank reports, as it arrives.
  using ResultEvent = std::function<void(Rank&, const RankMessage&)>;
  void OnFailure(ResultEvent f) { on_failure_ = std::move(f); }

  const TestSpec& spec() const { return spec_; }
  RankSpawner& spawner() { return *spawner_; }
  // Whether the ranks park after each test's verdict, waiting for the next
  // (a worker pool's: started with DISTTEST_INTERNAL_POOL).
  bool parks() const;
  // Whether the ranks are threads of one process (LaunchMode::kThreads).
  bool threads() const;
  std::vector<Rank>& ranks() { return ranks_; }
  const std::vector<Rank>& ranks() const { return ranks_; }
  TcpStoreServer& server() { return *server_; }
  // The ranks' host arena (null: none).
  HostArena* arena() const { return arena_.get(); }
  // The ranks' collective ledgers (null before Start()).
  const LedgerMemory* ledger() const { return ledger_.get(); }
  bool started() const { return started_; }
  // True when the store could not accept a connection (no descriptor): a
  // rank waits for one that will not come.
  std::string accept_trouble() const;
  // "Suite.Name/2ranks", or "... (its fixture SavedShards)".
  std::string Subject() const;

 private:
  static void RemoveStaleQueuesOnce();
  // Groups between Start and CleanUp: while any is, this process is a child
  // subreaper, and each one's descriptors are closed in the others' ranks.
  static std::set<const RankGroup*>& LiveGroups();
  // The ranks of every group of this process, not yet reaped: never taken
  // for another test's orphans.
  static std::set<pid_t>& LiveRanks();
  void OpenLogs();
  // rank_group_spawn.cc: every rank, or up to the first that cannot be started.
  void SpawnAll();
  void SpawnRank(int r);
  // What rank `r` is started with: its environment, its output's write ends
  // and every descriptor of this process it must not keep.
  SpawnRequest RequestFor(int r, int stdout_fd, int stderr_fd);
  void OnRankEnded(Rank& rank);
  // Ranks that are threads ended with their process: each one's outcome
  // as its own (rank_group_threads.cc); with `notify`, OnRankEnded() each.
  void OnThreadsEnded(const std::vector<Rank*>& ended, bool notify);
  // When every rank thread had reported and the process was still ended by
  // disttest: a failure of rank 0's (something in it ran on).
  void FailIfItRanOn(const std::vector<Rank*>& ended);
  // Rank threads share one output, which rank 0's relay reads: a sanitizer
  // report in it that a rank told as its own failure (race_report.h) is
  // that rank's, not rank 0's too.
  void LeaveSanitizerReportToItsRank();
  // A kExpectEnd message of `from`: its expected end goes to its rank.
  void ExpectEnd(Rank& from, const std::string& text);
  void ReapAll();
  // Ends the processes of this test's ranks that were handed to this
  // process (a subreaper) when a rank ended, naming each.
  void EndOrphans();
  // The parent's descriptors that serve these ranks: a rank of any other
  // group must close them.
  void AppendDescriptors(std::vector<int>* fds) const;

  TestSpec spec_;
  std::unique_ptr<RankSpawner> spawner_;
  std::string store_token_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<EmergencyCleanup> emergency_;
  // The ranks' small collectives (DISTTEST_NO_HOST_ARENA=1 turns it off).
  // A rank that ends breaks every wait in it.
  std::shared_ptr<HostArena> arena_;
  std::shared_ptr<LedgerMemory> ledger_;
  std::vector<Rank> ranks_;
  pid_t pgid_ = 0;
  std::vector<std::string> queue_names_;
  // Ranks write a byte to [1] after each result they queue; the poll loop
  // wakes on [0] and drains the queues at once.
  int results_ready_[2] = {-1, -1};
  // MASTER_PORT for the code under test: bound (SO_REUSEADDR) and never
  // listened on, so that no other process takes it while rank 0's code
  // may bind it (torch's env://, launch_from_env()). The harness's store
  // is on a port of its own.
  int master_port_fd_ = -1;
  // Above every descriptor open when the ranks began to spawn: the group's
  // per-rank descriptors (output pipes, pidfds) are moved up to it, so that
  // a forked rank closes all of its siblings' in one call (SpawnAll).
  int fd_floor_ = -1;
  int master_port_ = 0;
  // Between Start and CleanUp; the parent's children before the ranks.
  bool started_ = false;
  std::set<pid_t> children_before_;
  // The descendants of ranks the harness killed, taken just before: their
  // orphans are this test's whatever their environment says.
  std::set<pid_t> descendants_of_killed_;
  unsigned long long started_at_ticks_ = 0;  // NowInTicks() at Start.
  // SIGPIPE's disposition before Start, put back at CleanUp.
  struct sigaction sigpipe_before_ {};
  bool sigpipe_saved_ = false;
  // The OOM kills counted when the ranks started (resources.h).
  OomCounts oom_at_start_;
  RankEvent on_verdict_;
  RankEvent on_exit_;
  ResultEvent on_failure_;
  std::vector<pollfd> fds_;  // Serve's, kept between passes.
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SUPERVISE_RANK_GROUP_H_
