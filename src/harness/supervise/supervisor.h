// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Supervisor: one distributed test from the parent's side, over the ranks of
// a RankGroup (rank_group.h), from the moment they run it until each has
// ended it; and RunTest(), which runs one test on ranks of its own. Why the
// parent serves the store, and when it ends the ranks:
// docs/how-it-works.md#the-supervisor.
#ifndef DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_H_
#define DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/process/interrupt.h"
#include "harness/report/rank_report.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/spec.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Supervisor(RankGroup& group);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Serves the group until every rank has ended the test
  // (docs/how-it-works.md#the-supervisor).
  void Run();

 private:
  // Whether rank `r` has ended its part of the test.
  bool Ended(const RankGroup::Rank& rank) const;
  bool AnyRunning() const;
  void PrintHeartbeat(Clock::time_point now);
  int PollTimeoutMs(Clock::time_point now) const;
  // The others get the grace after `rank` did `how`.
  void StartGrace(const RankGroup::Rank& rank, const std::string& how,
                  bool skipped);
  // Whether `rank` is in LeakSanitizer's check after its body (its
  // threads are stopped by the check's tracer meanwhile).
  bool CheckingLeaks(const RankGroup::Rank& rank) const;
  // At the grace's end: whether a rank still checks for leaks, and the
  // grace waits for it (then it is moved on), at most kLeakCheckWait past
  // its end.
  bool WaitForLeakChecks(Clock::time_point now);
  void OnVerdict(RankGroup::Rank& rank);
  void OnExit(RankGroup::Rank& rank);
  // Prints the test's first failure when it happens, once: at 2 a.m. the
  // root cause is on the terminal before the consequences and the kills.
  // A failure that `follows` from another rank's is no first failure.
  void StreamFirstFailure(const RankGroup::Rank& rank, const std::string& what,
                          bool follows);
  // Prints the failure StreamFirstFailure() kept, once every rank's results
  // of the poll loop's turn are read (a partial skip read in the same turn
  // is then printed as the cause); beside a partial skip, once the failing
  // rank is done (it may skip too), or at the `last` flush.
  void FlushFirstFailure(bool last = false);
  // Takes the stacks of the ranks still running, then kills them. At the
  // test's `deadline` the ranks still running have overrun it, whatever
  // they do while the stacks are taken, unless what they do is fail by
  // themselves (ExcuseIfItFailedMeanwhile). `why`: whose doing the kill is
  // (a peer's failure at the grace's end).
  void KillStuck(const std::string& reason, bool deadline,
                 std::chrono::milliseconds stack_deadline,
                 RankReport::KilledFor why = RankReport::KilledFor::kItself);
  // When a rank has waited in a collective for a while: the first one
  // that ranks entered with different calls (OpenMismatch), or "". Ranks
  // of one host that disagree fail at once in the host arena; this catches
  // the communicators without one (made by the test, launch()'s groups).
  std::string CallsThatDiffer(Clock::time_point now);
  // Ranks that wait for each other, none of them moving for kStillFor
  // (deadlock.h), found at two looks in a row with no CPU time spent by
  // their processes between them: the cycle, or "".
  std::string Deadlock(Clock::time_point now);
  // Prints which collective the `stuck` ranks are in, and who is not
  // (collective_report.h), before they are killed.
  void PrintParagraph(const std::vector<RankGroup::Rank*>& stuck,
                      const std::string& reason);
  // A rank that was running at the deadline but, while the stacks were
  // taken, failed (its results from the `from`-th, those that came after
  // the deadline, hold a fatal failure: a collective of its own gave up,
  // naming the peer it waited for) and ended or reported its verdict: its
  // failure says why it was late, and no overrun or stack of a process that
  // is gone is added to it; true then. A rank that passed meanwhile, or
  // whose only fatal failure came before the deadline, still overran.
  bool ExcuseIfItFailedMeanwhile(RankGroup::Rank& rank, std::size_t from);

  // SIGTERM and SIGINT end this test with its report (interrupt.h).
  InterruptGuard interrupts_;
  bool interrupted_ = false;
  RankGroup& group_;
  const bool parks_;  // The group's ranks wait for a next test.
  Clock::time_point start_;
  Clock::time_point deadline_;
  std::chrono::milliseconds heartbeat_{0};  // 0: no progress lines.
  Clock::time_point next_heartbeat_;
  std::optional<Clock::time_point> grace_deadline_;
  std::string grace_reason_;
  std::optional<Clock::time_point> leak_wait_until_;
  bool resource_trouble_ = false;  // Ranks ended: the store could not accept.
  bool failure_streamed_ = false;
  struct PendingFailure {
    const RankGroup::Rank* rank;
    std::string what;
    std::chrono::milliseconds after;  // From the test's start.
  };
  std::optional<PendingFailure> pending_failure_;
  Clock::time_point next_match_;     // The next look at the ranks' calls.
  Clock::time_point next_deadlock_;  // The next look for a deadlock.
  // Each rank's progress (ledger.h) as last seen, and since when.
  std::vector<Progress> progress_;
  std::vector<Clock::time_point> progress_since_;
  // The soonest each rank's blocking call can give up by itself.
  std::vector<Clock::time_point> gives_up_;
  Clock::time_point last_look_;  // The last look at their progress.
  // Still, then finished, at the last look.
  std::vector<bool> still_looked_at_;
  // A deadlock found at the last look, to be confirmed at the next: its
  // text, and each still rank's CPU time then (-1: not still).
  struct DeadlockSeen {
    std::string text;
    std::vector<long long> cpu;
  };
  std::optional<DeadlockSeen> deadlock_seen_;
};

// Checks what a test asks for; throws ConfigError naming the problem
// (world size, timeout, backend, launch mode, failure grace).
void ValidateSpec(const TestSpec& spec);

// Runs one test on ranks of its own, to the end: spawns them, supervises
// them, ends and cleans up everything. Throws ConfigError for an invalid
// spec (before anything is started) and Error when the harness itself
// cannot work.
std::vector<RankReport> RunTest(const TestSpec& spec,
                                std::unique_ptr<RankSpawner> spawner);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SUPERVISE_SUPERVISOR_H_
