// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Ending stuck ranks: their stacks and ledgers taken, the paragraph on the
// collective they are in, a rank that failed by itself meanwhile excused,
// and the kill (KillStuck).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "harness/process/stack_dump.h"
#include "harness/report/stack_tree.h"
#include "harness/report/verdict.h"
#include "harness/supervise/supervisor.h"

namespace disttest::internal {
namespace {

// The stacks of the `stuck` ranks, one string each. Rank threads share a
// process: its stacks are taken once, and each rank gets its thread's.
std::vector<std::string> StacksOf(RankGroup& group,
                                  const std::vector<RankGroup::Rank*>& stuck,
                                  std::chrono::milliseconds deadline) {
  std::vector<pid_t> pids;
  for (const RankGroup::Rank* rank : stuck) {
    if (!rank->thread ||
        std::find(pids.begin(), pids.end(), rank->pid) == pids.end()) {
      pids.push_back(rank->pid);
    }
  }
  std::vector<std::string> stacks = group.spawner().Stacks(pids, deadline);
  if (!group.threads()) return stacks;
  std::vector<std::string> mine;
  for (const RankGroup::Rank* rank : stuck) {
    const auto at = std::find(pids.begin(), pids.end(), rank->pid);
    const std::string& whole =
        stacks[static_cast<std::size_t>(at - pids.begin())];
    const pid_t tid =
        group.ledger() != nullptr ? group.ledger()->Tid(rank->report.rank) : 0;
    mine.push_back(tid > 0 ? StackOfThread(whole, tid) : whole);
  }
  return mine;
}

}  // namespace

void Supervisor::KillStuck(const std::string& reason, bool deadline,
                           std::chrono::milliseconds stack_deadline,
                           RankReport::KilledFor why) {
  std::vector<pid_t> pids;
  std::vector<RankGroup::Rank*> stuck;
  std::vector<std::size_t> results_at_deadline;  // Of each stuck rank.
  group_.DrainChannels();  // A rank that reported its verdict is not stuck.
  group_.ObserveExits();
  for (RankGroup::Rank& rank : group_.ranks()) {
    if (rank.pid <= 0 || rank.exited || rank.report.done) continue;
    // Decided now: whatever the rank does while its stack is taken, it did
    // not finish in time.
    if (deadline) rank.report.overran = reason;
    if (CheckingLeaks(rank)) {
      // Its threads are the check's tracer's: no debugger can attach, and
      // where it is is known.
      if (rank.report.killed_because.empty()) {
        rank.report.killed_because = fmt::format(
            "{}; its test had ended, and it was still in LeakSanitizer's "
            "leak check",
            reason);
        rank.report.killed_for = why;
      }
      continue;
    }
    pids.push_back(rank.pid);
    stuck.push_back(&rank);
    results_at_deadline.push_back(rank.report.results.size());
    if (group_.spawner().Stopped(rank.pid) &&
        rank.report.killed_because.empty()) {
      rank.report.killed_because = fmt::format(
          "{}; {} (SIGSTOP, SIGTSTP or a tracer)", reason, kWasStopped);
      rank.report.killed_for = why;
      rank.report.was_stopped = true;
    }
  }
  // The deadline is the test's failure, printed below: a rank that gives
  // up a collective while its stack is taken only follows from it, and is
  // not streamed as the first failure.
  FlushFirstFailure();  // What came before this.
  if (deadline) failure_streamed_ = true;
  // Where each rank's communicators are now, before stacks and kills
  // change anything.
  if (!pids.empty()) group_.ReadLedgers(/*again=*/true);
  if (!pids.empty()) {
    std::printf("[ disttest ] %s: %s; taking the stacks of %zu rank%s\n",
                group_.Subject().c_str(), reason.c_str(), pids.size(),
                pids.size() == 1 ? "" : "s");
    std::fflush(stdout);
    std::vector<std::string> stacks = StacksOf(group_, stuck, stack_deadline);
    for (std::size_t i = 0; i < stuck.size(); ++i) {
      stuck[i]->report.stack = std::move(stacks[i]);
    }
    // Taking stacks takes a while: a rank that finished meanwhile is not
    // stuck, and is not killed.
    group_.DrainChannels();
    group_.ObserveExits();
    std::vector<RankGroup::Rank*> still;
    for (std::size_t i = 0; i < stuck.size(); ++i) {
      if (!ExcuseIfItFailedMeanwhile(*stuck[i], results_at_deadline[i])) {
        still.push_back(stuck[i]);
      }
    }
    PrintParagraph(still, reason);
  }
  group_.Kill(reason, why);
  grace_deadline_.reset();
}

void Supervisor::PrintParagraph(const std::vector<RankGroup::Rank*>& stuck,
                                const std::string& reason) {
  // As the verdict will say it, with the stuck ranks as they were found.
  std::vector<RankReport> reports;
  for (RankGroup::Rank& rank : group_.ranks()) {
    RankReport r;
    r.rank = rank.report.rank;
    r.ledger = rank.report.ledger;
    r.stack = rank.report.stack;
    r.outcome = rank.report.outcome;
    // Its verdict, where it came: a rank that failed and ended before the
    // others hung is "failed", not one whose report was lost.
    r.done = rank.report.done;
    r.results = rank.report.results;
    if (std::find(stuck.begin(), stuck.end(), &rank) != stuck.end()) {
      r.overran = reason;
      r.outcome.reset();
    }
    reports.push_back(std::move(r));
  }
  const std::string text = CollectiveParagraph(group_.spec(), reports);
  if (text.empty()) return;
  std::printf("[ disttest ] %s: %s\n", group_.Subject().c_str(), text.c_str());
  std::fflush(stdout);
}

bool Supervisor::ExcuseIfItFailedMeanwhile(RankGroup::Rank& rank,
                                           std::size_t from) {
  if (!rank.exited && !rank.report.done) return false;
  if (!rank.report.killed_because.empty()) return false;
  const std::vector<RankMessage>& results = rank.report.results;
  const bool failed = std::any_of(
      results.begin() +
          static_cast<std::ptrdiff_t>(std::min(from, results.size())),
      results.end(), [](const RankMessage& m) {
        return m.kind == RankMessage::Kind::kFatalFailure;
      });
  if (!failed) return false;
  rank.report.overran.clear();
  // What the stack tool said of a process that had ended, not a stack.
  if (ParseStacks(rank.report.stack).empty()) rank.report.stack.clear();
  // Its collectives as it left them (it failed in one, say), not as they
  // were at the deadline.
  if (const LedgerMemory* ledger = group_.ledger()) {
    rank.report.ledger = ledger->Read(rank.report.rank);
  }
  return true;
}

}  // namespace disttest::internal
