// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup's ranks that are threads of one process (LaunchMode::kThreads):
// the process ends once for all of them, and each rank's end is told as its
// own: its verdict where it reported one, the crash or the exit() of its
// own thread, or the other rank's thread that ended them all.
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include "harness/rank_outcome.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {

bool RankGroup::threads() const {
  return spec_.options.launch == LaunchMode::kThreads;
}

namespace {

// A crash of rank `by`'s thread that its process ended with an exit (a
// sanitizer's handler does): said, as its failure.
void AddCrashTurnedExit(RankReport& report, int by, const std::string& what,
                        const RankOutcome& process) {
  report.results.push_back(
      {RankMessage::Kind::kFatalFailure, "", -1,
       fmt::format("rank {}'s thread {}, and the process of every rank's "
                   "thread then {} (a sanitizer's handler ends a crash so)",
                   by, what, process.str())});
  report.received.resize(
      report.results.size(),
      report.ended_at.value_or(std::chrono::steady_clock::now()));
}

}  // namespace

void RankGroup::OnThreadsEnded(const std::vector<Rank*>& ended, bool notify) {
  // The rank whose thread ended the process by its own hand, if one did:
  // it noted how in its ledger area (thread_rank_host.cc).
  int by = -1;
  int how = 0;
  for (int r = 0; ledger_ != nullptr && r < spec_.world_size; ++r) {
    if (const int h = ledger_->EndedProcess(r); h != 0) {
      by = r;
      how = h;
      break;
    }
  }
  const std::string what = how == LedgerMemory::kCalledExit
                               ? std::string("called exit()")
                               : fmt::format("crashed ({})", SignalName(how));
  for (Rank* rank : ended) {
    RankReport& report = rank->report;
    if (!report.outcome) continue;
    const RankOutcome process = *report.outcome;
    // The process ends with 0 once every thread has reported its verdict
    // (thread_rank_host.cc); any other end is someone's.
    const bool clean = process.exited() && process.exit_code() == kExitPassed;
    if (report.done) {
      // Its part was over: judged by its verdict where the process ended
      // cleanly, or by disttest's kill (Kill() said so), or by another
      // rank's thread. An end no rank's thread noted (a crash in a thread
      // no rank runs, an exit() there) or its own thread's stays its end:
      // a failure, never a pass by omission.
      if (clean) {
        report.outcome = RankOutcome::FromWaitStatus(
            W_EXITCODE(ExitCodeOf(*report.done), 0));
      } else if (by >= 0 && by != report.rank) {
        report.killed_after_done = true;
      }
      if (by == report.rank && how != LedgerMemory::kCalledExit &&
          process.exited()) {
        AddCrashTurnedExit(report, by, what, process);
      }
    } else if (by == report.rank && how != LedgerMemory::kCalledExit &&
               process.exited()) {
      AddCrashTurnedExit(report, by, what, process);
    } else if (by == report.rank && how == LedgerMemory::kCalledExit) {
      report.results.push_back(
          {RankMessage::Kind::kFatalFailure, spec_.file, spec_.line,
           fmt::format("rank {}'s thread called exit() ({}), which ends the "
                       "process of every rank's thread: the ranks are "
                       "threads of one process (LaunchMode::kThreads)",
                       by, process.str())});
      report.received.resize(
          report.results.size(),
          report.ended_at.value_or(std::chrono::steady_clock::now()));
    } else if (by >= 0 && by != report.rank && report.killed_because.empty()) {
      report.killed_because = fmt::format(
          "its thread ended with the process when rank {}'s thread {}: the "
          "ranks are threads of one process (LaunchMode::kThreads)",
          by, what);
      report.killed_for = RankReport::KilledFor::kPeersFailure;
    }
  }
  // Every rank had reported its verdict, and still the process did not end
  // by the deadline: something in it ran on (a thread_local's destructor, a
  // thread a rank started that it waits for, LeakSanitizer's check of the
  // threads' heap). Its ranks were not done: a failure, told to rank 0.
  const bool all_done =
      std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.report.done && r.report.killed_after_done;
      });
  if (all_done && !ended.empty() && ended.front()->report.outcome &&
      ended.front()->report.outcome->signaled()) {
    RankReport& first = ranks_.front().report;
    first.results.push_back(
        {RankMessage::Kind::kFatalFailure, "", -1,
         "every rank had reported its verdict, but the process of the rank "
         "threads did not end, and disttest ended it at the test's deadline: "
         "something in it ran on (a thread_local's destructor, a thread a "
         "rank started that it waits for, LeakSanitizer's check of the "
         "threads' heap); the ranks are threads of one process "
         "(LaunchMode::kThreads)"});
    first.received.resize(
        first.results.size(),
        first.ended_at.value_or(std::chrono::steady_clock::now()));
  }
  if (!notify) return;
  for (Rank* rank : ended) OnRankEnded(*rank);
}

}  // namespace disttest::internal
