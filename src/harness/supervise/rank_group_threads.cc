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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/rank_outcome.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {

bool RankGroup::threads() const {
  return spec_.options.launch == LaunchMode::kThreads;
}

namespace {

// A failure of the rank's that the harness found, in arrival order.
void AddFailure(RankReport& report, std::string text) {
  report.results.push_back(
      {RankMessage::Kind::kFatalFailure, "", -1, std::move(text)});
  report.received.resize(
      report.results.size(),
      report.ended_at.value_or(std::chrono::steady_clock::now()));
}

// The rank whose thread ended the process by its own hand, and how, if one
// did: it noted so in its ledger area (thread_rank_host.cc); {-1, 0}.
std::pair<int, int> WhoEndedIt(const LedgerMemory* ledger, int world) {
  for (int r = 0; ledger != nullptr && r < world; ++r) {
    if (const int how = ledger->EndedProcess(r); how != 0) return {r, how};
  }
  return {-1, 0};
}

}  // namespace

void RankGroup::OnThreadsEnded(const std::vector<Rank*>& ended, bool notify) {
  const auto [by, how] = WhoEndedIt(ledger_.get(), spec_.world_size);
  const bool crash = by >= 0 && how != LedgerMemory::kCalledExit &&
                     how != LedgerMemory::kCalledQuickExit;
  const std::string what = crash ? fmt::format("crashed ({})", SignalName(how))
                           : how == LedgerMemory::kCalledQuickExit
                               ? std::string("called quick_exit()")
                               : std::string("called exit()");
  // Whether some rank's thread ran the test's code when the process ended.
  bool in_tests_code = false;
  for (int r = 0; ledger_ && r < spec_.world_size; ++r) {
    in_tests_code = in_tests_code || InTheTestsCode(ledger_->Phase(r));
  }
  for (Rank* rank : ended) {
    RankReport& report = rank->report;
    if (!report.outcome) continue;
    const RankOutcome process = *report.outcome;
    const bool mine = by == report.rank;
    // The process ends with 0 once every thread has reported its verdict
    // (thread_rank_host.cc); any other end is someone's.
    const bool clean = process.exited() && process.exit_code() == kExitPassed;
    if (report.done && clean) {
      // Its part was over: judged by its verdict.
      report.outcome =
          RankOutcome::FromWaitStatus(W_EXITCODE(ExitCodeOf(*report.done), 0));
    } else if (report.done && by >= 0 && !mine) {
      // So too after another rank's thread ended the process (after
      // disttest's kill, Kill() said so). An end no rank's thread noted (a
      // crash in a thread no rank runs, an exit() there) or its own
      // thread's stays its end: a failure, never a pass by omission.
      report.killed_after_done = true;
    } else if (!report.done && by >= 0 && !mine &&
               report.killed_because.empty()) {
      report.killed_because = fmt::format(
          "its thread ended with the process when rank {}'s thread {}: the "
          "ranks are threads of one process (LaunchMode::kThreads)",
          by, what);
      report.killed_for = RankReport::KilledFor::kPeersFailure;
    }
    if (mine && !crash && !report.done) {
      report.ended_the_process = fmt::format(
          "rank {}'s thread {} ({}), which ends the process of every rank's "
          "thread: the ranks are threads of one process "
          "(LaunchMode::kThreads)",
          by, what, process.str());
    } else if (by < 0 && !report.done && process.exited() && in_tests_code) {
      // No rank's thread said it ended the process, in the test's code:
      // an _exit() (which no handler sees) or a thread no rank runs.
      report.ended_the_process = fmt::format(
          "the process of every rank's thread {} while the test ran, by no "
          "rank's exit(): an _exit(), or a thread that no rank runs; the "
          "ranks are threads of one process (LaunchMode::kThreads)",
          process.str());
    } else if (mine && crash && process.exited()) {
      // A sanitizer's handler ends a crash with an exit.
      AddFailure(report,
                 fmt::format("rank {}'s thread {}, and the process of every "
                             "rank's thread then {} (a sanitizer's handler "
                             "ends a crash so)",
                             by, what, process.str()));
    }
  }
  FailIfItRanOn(ended);
  if (!notify) return;
  for (Rank* rank : ended) OnRankEnded(*rank);
}

void RankGroup::LeaveSanitizerReportToItsRank() {
  if (!threads() || ranks_.empty()) return;
  std::optional<SanitizerReport>& found = ranks_.front().report.sanitizer;
  if (!found) return;
  for (const Rank& rank : ranks_) {
    for (const RankMessage& m : rank.report.results) {
      if (m.message.find(found->headline) != std::string::npos) {
        found.reset();
        return;
      }
    }
  }
  // A report of a crash (TSan's "SEGV on unknown address") is the crashed
  // thread's rank's, when one noted that it ended the process.
  const auto [by, how] = WhoEndedIt(ledger_.get(), spec_.world_size);
  if (by > 0 && how != LedgerMemory::kCalledExit &&
      how != LedgerMemory::kCalledQuickExit &&
      by < static_cast<int>(ranks_.size())) {
    ranks_[static_cast<std::size_t>(by)].report.sanitizer = std::move(found);
    found.reset();
  }
}

void RankGroup::FailIfItRanOn(const std::vector<Rank*>& ended) {
  // Every rank had reported its verdict, and still the process did not end
  // by the deadline: something in it ran on (a thread_local's destructor, a
  // thread a rank started that it waits for, LeakSanitizer's check of the
  // threads' heap). Its ranks were not done: a failure, told to rank 0.
  const bool all_done =
      std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.report.done && r.report.killed_after_done;
      });
  if (!all_done || ended.empty() || !ended.front()->report.outcome ||
      !ended.front()->report.outcome->signaled()) {
    return;
  }
  AddFailure(ranks_.front().report,
             "every rank had reported its verdict, but the process of the "
             "rank threads did not end, and disttest ended it at the test's "
             "deadline: something in it ran on (a thread_local's destructor, "
             "a thread a rank started that it waits for, LeakSanitizer's "
             "check of the threads' heap); the ranks are threads of one "
             "process (LaunchMode::kThreads)");
}

}  // namespace disttest::internal
