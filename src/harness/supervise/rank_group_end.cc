// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup's end: the ranks killed and reaped, the processes they left
// ended, their last output, results and ledgers collected, and everything
// that served them released (End, CleanUp).
#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/threads.h"
#include "disttest/env/names.h"
#include "env/internal_names.h"
#include "harness/process/descendants.h"
#include "harness/process/keeper.h"
#include "harness/report/trace.h"
#include "harness/spawn/zygote.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {
namespace {

// How long, after SIGKILL, the parent waits for a rank to be reapable. Only
// a process stuck in uninterruptible sleep (a hung driver) takes longer.
constexpr std::chrono::seconds kReapDeadline(10);

}  // namespace

std::vector<RankReport> RankGroup::End(const std::string& reason) {
  // Kill the group and reap first: a process a rank started may still hold
  // the output pipes, and its death lets the relays see end of file.
  Kill(reason);
  ReapAll();
  EndOrphans();
  // Rank 0 is reaped: the group id may now be reused.
  if (emergency_) emergency_->Arm(0, queue_names_);
  FinishOutput();
  DrainChannels();
  LeaveSanitizerReportToItsRank();
  // What the ranks' communicators did, for the verdict of a failed test
  // (read before CleanUp: the next Start() makes a new ledger).
  if (TraceWanted() ||
      std::any_of(ranks_.begin(), ranks_.end(),
                  [](const Rank& r) { return RankFailed(r.report); }) ||
      (ledger_ != nullptr && !ledger_->DigestsAgree())) {
    ReadLedgers(/*again=*/false);
  }
  std::vector<RankReport> reports;
  for (Rank& rank : ranks_) {
    if (!rank.late_expectation.empty() && !rank.report.expected_end) {
      rank.report.channel_errors.push_back(rank.late_expectation);
    }
    rank.late_expectation.clear();
    reports.push_back(std::move(rank.report));
  }
  CleanUp();
  return reports;
}

void RankGroup::ReadLedgers(bool again) {
  if (ledger_ == nullptr) return;
  for (Rank& rank : ranks_) {
    if (!again && rank.report.ledger) continue;
    rank.report.ledger = ledger_->Read(rank.report.rank);
  }
}

void RankGroup::FinishOutput() {
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->Finish();
    if (rank.err) rank.err->Finish();
    // A sanitizer writes to stderr (to stdout where told to): the first
    // report of either is the rank's.
    for (OutputRelay* relay : {rank.err.get(), rank.out.get()}) {
      if (relay == nullptr) continue;
      std::optional<SanitizerReport> found = relay->sanitizer().Take();
      if (found && !rank.report.sanitizer) rank.report.sanitizer = found;
    }
  }
}

void RankGroup::Kill(const std::string& reason, RankReport::KilledFor why) {
  std::set<pid_t> alive;
  for (const Rank& rank : ranks_) {
    if (rank.pid > 0 && !rank.exited) alive.insert(rank.pid);
  }
  if (!alive.empty()) {
    for (pid_t pid : DescendantsOf(alive)) descendants_of_killed_.insert(pid);
  }
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    if (rank.report.done) {
      rank.report.killed_after_done = true;
    } else if (rank.report.killed_because.empty()) {
      rank.report.killed_because = reason;
      rank.report.killed_for = why;
    }
    spawner_->Kill(rank.pid);
  }
  // The group also holds whatever the ranks started. Its id is rank 0's pid,
  // which stays ours until rank 0 is reaped (ObserveExits leaves it a
  // zombie), so this never signals a stranger's group.
  if (pgid_ > 0 && !ranks_.empty() && !ranks_[0].reaped) {
    spawner_->KillGroup(pgid_);
  }
}

void RankGroup::ReapAll() {
  auto deadline = std::chrono::steady_clock::now() + kReapDeadline;
  // Rank threads share their process: reaped once, for all of them.
  std::map<pid_t, std::optional<RankOutcome>> reaped;
  std::vector<Rank*> ended_threads;
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.reaped) continue;
    auto once = reaped.find(rank.pid);
    std::optional<RankOutcome> outcome =
        once != reaped.end() ? once->second
                             : spawner_->Reap(rank.pid, deadline);
    reaped.emplace(rank.pid, outcome);
    if (outcome && !rank.exited && rank.thread) {
      ended_threads.push_back(&rank);
    }
    if (!outcome && kill(rank.pid, 0) != 0 && errno == ESRCH) {
      // Gone: other code of the test process (a SIGCHLD handler) reaped it.
      // Its end, if disttest saw it first, stands.
      rank.reaped = true;
      LiveRanks().erase(rank.pid);
      if (!rank.exited) {
        rank.exited = true;
        rank.report.channel_errors.push_back(std::string(kReapedByOthers));
      }
      continue;
    }
    if (!outcome) {
      rank.report.channel_errors.push_back(fmt::format(
          "could not be reaped within {} s of SIGKILL (uninterruptible "
          "sleep in a driver?)",
          kReapDeadline.count()));
      continue;
    }
    rank.reaped = true;
    LiveRanks().erase(rank.pid);
    if (!rank.exited) {
      rank.exited = true;
      rank.report.outcome = *outcome;
      rank.report.ended_at = std::chrono::steady_clock::now();
    }
  }
  if (!ended_threads.empty()) OnThreadsEnded(ended_threads, /*notify=*/false);
}

void RankGroup::EndOrphans() {
  if (!started_) return;
  // Only processes of this test's ranks: not there when its ranks started,
  // not a rank (of any test), and carrying its MASTER_PORT (set at exec);
  // forked ranks' descendants that never exec'd show the environment the
  // parent was started with, but the parent of forked ranks runs no
  // threads that could have started them.
  const std::string mine = fmt::format("{}={}", env::kMasterPort, master_port_);
  const std::string zygote_child =
      fmt::format("{}={}", env::kInternalZygoteParent, getpid());
  // A parent that runs no thread but this one started no process during
  // the test: every new child is an orphan of the ranks (a daemon that
  // cleared its environment too).
  const bool only_ranks_start_processes =
      spec_.options.launch != LaunchMode::kExec || ThreadCount() == 1;
  const auto pick = [&](pid_t pid) {
    if (children_before_.count(pid) != 0 || LiveRanks().count(pid) != 0 ||
        pid == Zygote::Get().pid() || pid == keeper::Pid()) {
      return false;
    }
    // A process a rank forked without exec started with the environment
    // of what the rank was forked from: a kExec rank's is the zygote's.
    // Started during the test (a tick's slack): not a helper's child from
    // before it that came to this subreaper meanwhile.
    return (only_ranks_start_processes &&
            StartedAt(pid) + 1 >= started_at_ticks_) ||
           descendants_of_killed_.count(pid) != 0 ||
           EnvironmentHas(pid, mine) || EnvironmentHas(pid, zygote_child);
  };
  for (const std::string& process : EndChildren(pick)) {
    std::printf(
        "[ disttest ] note: %s: ended process %s, which its ranks started "
        "and left running\n",
        Subject().c_str(), process.c_str());
    std::fflush(stdout);
  }
}

void RankGroup::CleanUp() {
  Kill("the test ended");
  ReapAll();
  EndOrphans();
  if (started_) {
    started_ = false;
    if (sigpipe_saved_) sigaction(SIGPIPE, &sigpipe_before_, nullptr);
    sigpipe_saved_ = false;
    LiveGroups().erase(this);
    // The last one: orphans of other code go to init again, as before.
    if (LiveGroups().empty()) prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  for (Rank& rank : ranks_) {
    if (rank.pidfd >= 0) close(rank.pidfd);
    rank.pidfd = -1;
    rank.out.reset();
    rank.err.reset();
    if (rank.log != nullptr) std::fclose(rank.log);
    rank.log = nullptr;
    if (rank.channel) {
      ResultChannel::Remove(rank.channel->name());
      rank.channel.reset();
    }
  }
  server_.reset();
  emergency_.reset();
  for (int& fd : results_ready_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (master_port_fd_ >= 0) close(master_port_fd_);
  master_port_fd_ = -1;
}

}  // namespace disttest::internal
