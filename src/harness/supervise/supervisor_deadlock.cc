// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How the supervisor finds ranks that cannot go on while no deadline has
// come: ranks that wait in a collective entered with different calls, and
// ranks that wait for each other (a deadlock), from their ledgers.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>

#include "harness/report/collective_report.h"
#include "harness/report/deadlock.h"
#include "harness/supervise/supervisor.h"
#include "harness/supervise/supervisor_looks.h"

namespace disttest::internal {
namespace {

// After a look that found the calls alike, the next one waits this long.
constexpr std::chrono::milliseconds kMatchAgain(1000);
// Ranks that wait for each other are a deadlock once none of them has
// moved for this long, unless one's call gives up by itself within
// kGivesUpSoon (a test that waits for a timeout on purpose gets it).
constexpr std::chrono::milliseconds kStillFor(500);
constexpr std::chrono::milliseconds kGivesUpSoon(2000);
// The CPU time (clock ticks, 10 ms) a rank in a deadlock may spend between
// two looks: its runtime's own threads waking now and then, not one that
// computes.
constexpr long long kIdleTicks = 2;

// A process's CPU time so far, all threads, in clock ticks (utime + stime
// of /proc/<pid>/stat); -1 when it cannot be read.
long long CpuTicks(pid_t pid) {
  if (pid <= 0) return -1;
  std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
  if (f == nullptr) return -1;
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // After the command's closing parenthesis: field 3 (state) on; utime and
  // stime are fields 14 and 15.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(p + 1,
                  " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &utime, &stime) != 2) {
    return -1;
  }
  return static_cast<long long>(utime + stime);
}

}  // namespace

std::string Supervisor::CallsThatDiffer(Clock::time_point now) {
  next_match_ = now + kMatchEvery;
  const LedgerMemory* ledger = group_.ledger();
  if (ledger == nullptr) return "";
  const std::int64_t before =
      MonotonicNs() -
      std::chrono::duration_cast<std::chrono::nanoseconds>(kMatchAfter).count();
  bool waiting = false;
  for (const RankGroup::Rank& rank : group_.ranks()) {
    if (!Ended(rank) && ledger->InCollectiveSince(rank.report.rank, before)) {
      waiting = true;
      break;
    }
  }
  if (!waiting) return "";
  std::vector<RankLedgerView> views;
  views.reserve(group_.ranks().size());
  for (const RankGroup::Rank& rank : group_.ranks()) {
    views.push_back(ledger->Read(rank.report.rank));
  }
  std::string differ = OpenMismatch(views);
  if (differ.empty()) next_match_ = now + kMatchAgain;
  return differ;
}

std::string Supervisor::Deadlock(Clock::time_point now) {
  const LedgerMemory* ledger = group_.ledger();
  if (ledger == nullptr) return "";
  const std::vector<RankGroup::Rank>& ranks = group_.ranks();
  progress_.resize(ranks.size());
  progress_since_.resize(ranks.size(), now);
  gives_up_.resize(ranks.size(), now);
  if (last_look_ == Clock::time_point()) last_look_ = start_;
  std::vector<bool> still(ranks.size(), false);
  std::vector<bool> finished(ranks.size(), false);
  bool any = false;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    // Its verdict came: it calls nothing more in this test.
    finished[i] = ranks[i].report.done.has_value();
    const Progress p =
        Ended(ranks[i]) ? Progress{} : ledger->ProgressOf(ranks[i].report.rank);
    if (!(p == progress_[i])) {
      progress_[i] = p;
      progress_since_[i] = now;
      // Its call began after the last look: it gives up no sooner than
      // its timeout after that.
      gives_up_[i] = last_look_ + std::chrono::milliseconds(p.timeout_ms);
      continue;
    }
    // In a blocking call, or waiting to make a communicator.
    const bool waits = p.blocked != 0 || (p.making & 1) != 0;
    still[i] = waits && !p.threads && now - progress_since_[i] >= kStillFor &&
               gives_up_[i] - now > kGivesUpSoon;
    any = any || still[i];
  }
  last_look_ = now;
  if (!any) {
    deadlock_seen_.reset();
    return "";
  }
  // The same ranks still and finished as at the last look: what was no
  // deadlock then is none now (unless one waits to be confirmed).
  std::vector<bool> looked_at = still;
  looked_at.insert(looked_at.end(), finished.begin(), finished.end());
  if (!deadlock_seen_ && looked_at == still_looked_at_) return "";
  still_looked_at_ = std::move(looked_at);
  std::vector<RankLedgerView> views;
  views.reserve(ranks.size());
  for (const RankGroup::Rank& rank : ranks) {
    views.push_back(ledger->Read(rank.report.rank));
  }
  // Read after the progress: a rank that moved meanwhile is not still.
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (still[i] &&
        (views[i].written != progress_[i].written ||
         views[i].blocked != progress_[i].blocked ||
         views[i].making.has_value() != ((progress_[i].making & 1) != 0))) {
      still[i] = false;
    }
  }
  std::string found = FindDeadlock(views, still, finished);
  if (found.empty()) {
    deadlock_seen_.reset();
    return "";
  }
  // Declared at the next look, when it is the same and none of the still
  // ranks' processes ran meanwhile: a thread of theirs that computes (and
  // has not called a communicator yet) may still send what they wait for.
  std::vector<long long> cpu(ranks.size(), -1);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (still[i]) cpu[i] = CpuTicks(ranks[i].pid);
  }
  if (deadlock_seen_ && deadlock_seen_->text == found) {
    bool idle = true;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (!still[i]) continue;
      const long long before = deadlock_seen_->cpu[i];
      idle =
          idle && before >= 0 && cpu[i] >= 0 && cpu[i] - before <= kIdleTicks;
    }
    if (idle) return found;
  }
  deadlock_seen_ = DeadlockSeen{std::move(found), std::move(cpu)};
  return "";
}

}  // namespace disttest::internal
