// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/supervise/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/process/descendants.h"
#include "harness/process/resources.h"
#include "harness/process/stack_dump.h"
#include "harness/report/collective_report.h"
#include "harness/report/deadlock.h"
#include "harness/report/stack_tree.h"
#include "harness/report/verdict.h"

namespace disttest::internal {
namespace {

// Result queues have no descriptor to poll; the loop looks at them this
// often while ranks run. Store requests, output and exits wake it at once.
constexpr int kDrainTickMs = 10;

// How long taking the stacks of stuck ranks may take, all ranks together.
constexpr std::chrono::seconds kStackDeadline(15);
// The same when a signal ended the test: the runner that sent it waits a
// few seconds at most (ctest's TIMEOUT_SIGNAL_GRACE_PERIOD).
constexpr std::chrono::seconds kInterruptStacks(5);

// How much longer than the failure grace a rank may take for its leak
// check (scaled): hundreds of ranks that check at once on a few cores take
// seconds, and a rank in it is not stuck.
constexpr std::chrono::seconds kLeakCheckWait(20);

// How often the parent looks for ranks that wait in a collective that
// others entered with another call, and how long a rank must have waited
// for a look at every rank's calls (a few microseconds a rank).
constexpr std::chrono::milliseconds kMatchEvery(250);
constexpr std::chrono::milliseconds kMatchAfter(200);
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

void ValidateSpec(const TestSpec& spec) {
  if (!ValidWorldSize(spec.world_size)) {
    throw ConfigError(fmt::format(
        "world size {} is invalid: DIST_TEST_F world sizes must be between 1 "
        "and {}",
        spec.world_size, kMaxWorldSize));
  }
  if (spec.options.timeout.count() <= 0) {
    throw ConfigError(
        fmt::format("options().timeout of {} ms is invalid: it must be > 0",
                    spec.options.timeout.count()));
  }
  auto backend = static_cast<int>(spec.options.backend);
  if (backend < static_cast<int>(Backend::kGloo) ||
      backend > static_cast<int>(Backend::kAuto)) {
    throw ConfigError(
        fmt::format("options().backend has the unknown value {}", backend));
  }
  auto launch = static_cast<int>(spec.options.launch);
  if (launch != static_cast<int>(LaunchMode::kFork) &&
      launch != static_cast<int>(LaunchMode::kExec)) {
    throw ConfigError(
        fmt::format("options().launch has the unknown value {}", launch));
  }
  if (spec.options.failure_grace.count() < 0) {
    throw ConfigError("options().failure_grace must not be negative");
  }
}

Supervisor::Supervisor(RankGroup& group)
    : group_(group), parks_(group.parks()) {
  group_.OnVerdict([this](RankGroup::Rank& rank) { OnVerdict(rank); });
  group_.OnExit([this](RankGroup::Rank& rank) { OnExit(rank); });
  group_.OnFailure([this](RankGroup::Rank& rank, const RankMessage& m) {
    // Where, in one word: the whole path comes with the verdict.
    const std::size_t slash = m.file.rfind('/');
    StreamFirstFailure(
        rank, m.file.empty()
                  ? m.message
                  : fmt::format("at {}:{}: {}", m.file.substr(slash + 1),
                                m.line, m.message));
  });
  start_ = Clock::now();
  next_match_ =
      group_.spec().options.compare_calls && CompareCallsWhileWaiting()
          ? start_ + kMatchEvery
          : Clock::time_point::max();
  next_deadlock_ = next_match_;
  heartbeat_ = HeartbeatInterval();
  next_heartbeat_ = start_ + heartbeat_;
  std::optional<int> debug_rank = DebugRankVariable();
  if (debug_rank && *debug_rank < group_.spec().world_size) {
    // Someone is at a debugger; the clock does not run meanwhile, and a
    // rank stopped there in a call is no deadlock.
    deadline_ = Clock::time_point::max();
    next_deadlock_ = Clock::time_point::max();
  } else {
    deadline_ = start_ + group_.spec().options.timeout;
  }
}

Supervisor::~Supervisor() {
  // Failures read after Run() (the group's last drain) are streamed too.
  FlushFirstFailure();
  group_.OnVerdict(nullptr);
  group_.OnExit(nullptr);
  group_.OnFailure(nullptr);
}

void Supervisor::StreamFirstFailure(const RankGroup::Rank& rank,
                                    const std::string& what) {
  if (failure_streamed_ || pending_failure_ || FollowsFromAnother(what)) {
    return;
  }
  // Printed once the poll loop has read every rank's results this turn
  // (FlushFirstFailure): one that came in the same turn may be its cause.
  pending_failure_ =
      PendingFailure{&rank, what,
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         Clock::now() - start_)};
}

void Supervisor::FlushFirstFailure() {
  if (!pending_failure_) return;
  PendingFailure first = std::move(*pending_failure_);
  pending_failure_.reset();
  if (failure_streamed_) return;
  failure_streamed_ = true;
  // A rank that skipped while this one ran, where the test allows no
  // partial skip, came first: its skip is the failure, this one follows
  // (its collective found that rank's body gone).
  if (group_.spec().options.skip_policy != SkipPolicy::kAllowPartial) {
    for (const RankGroup::Rank& other : group_.ranks()) {
      if (&other == first.rank || other.report.done != RankVerdict::kSkipped) {
        continue;
      }
      const RankMessage* skip = FirstSkip(other.report);
      const std::string reason = skip != nullptr ? skip->message : "";
      first.rank = &other;
      first.what = reason.empty()
                       ? std::string("it skipped while the other ranks ran")
                       : fmt::format(
                             "it skipped (\"{}\") while the other "
                             "ranks ran",
                             reason);
      break;
    }
  }
  // One line of it: the whole message comes with the verdict.
  constexpr std::size_t kMaxText = 300;
  std::string text = first.what.substr(0, first.what.find('\n'));
  if (text.size() > kMaxText) text = text.substr(0, kMaxText) + " ...";
  std::printf("[ disttest ] %s: first failure, rank %d after %lld ms: %s\n",
              group_.Subject().c_str(), first.rank->report.rank,
              static_cast<long long>(first.after.count()), text.c_str());
  std::fflush(stdout);
}

bool Supervisor::Ended(const RankGroup::Rank& rank) const {
  return rank.pid <= 0 || rank.exited ||
         (parks_ && rank.report.done.has_value());
}

bool Supervisor::AnyRunning() const {
  for (const RankGroup::Rank& rank : group_.ranks()) {
    if (!Ended(rank)) return true;
  }
  return false;
}

void Supervisor::PrintHeartbeat(Clock::time_point now) {
  std::vector<int> done, running, stopped;
  for (const RankGroup::Rank& rank : group_.ranks()) {
    (rank.exited || rank.report.done ? done : running)
        .push_back(rank.report.rank);
    if (!rank.exited && !rank.report.done && !CheckingLeaks(rank) &&
        group_.spawner().Stopped(rank.pid)) {
      stopped.push_back(rank.report.rank);
    }
  }
  auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  const std::string subject = group_.Subject();
  std::printf("[ disttest ] %s: %lld s; finished: %s; running: %s\n",
              subject.c_str(), static_cast<long long>(seconds),
              done.empty() ? "none" : RankNumbers(done).c_str(),
              running.empty() ? "none" : RankNumbers(running).c_str());
  if (!stopped.empty()) {
    std::printf(
        "[ disttest ] %s: stopped, not running (SIGSTOP, SIGTSTP or "
        "a tracer): %s\n",
        subject.c_str(), RanksText(stopped).c_str());
  }
  std::fflush(stdout);
}

int Supervisor::PollTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = deadline_;
  if (grace_deadline_ && *grace_deadline_ < next) next = *grace_deadline_;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
  return static_cast<int>(
      std::clamp<long long>(left.count() + 1, 0, kDrainTickMs));
}

void Supervisor::StartGrace(const RankGroup::Rank& rank, const std::string& how,
                            bool skipped) {
  auto grace = group_.spec().options.failure_grace * (skipped ? 5 : 1);
  grace_deadline_ = Clock::now() + grace;
  grace_reason_ = fmt::format("{} {} ms after rank {} {}", kStillRunningAfter,
                              grace.count(), rank.report.rank, how);
}

bool Supervisor::CheckingLeaks(const RankGroup::Rank& rank) const {
  const LedgerMemory* ledger = group_.ledger();
  return ledger != nullptr &&
         ledger->Phase(rank.report.rank) == RankPhase::kCheckingLeaks;
}

bool Supervisor::WaitForLeakChecks(Clock::time_point now) {
  const bool first = !leak_wait_until_;
  if (first) leak_wait_until_ = now + Scaled(kLeakCheckWait);
  if (now >= *leak_wait_until_) return false;
  std::vector<int> checking;
  for (const RankGroup::Rank& rank : group_.ranks()) {
    if (!Ended(rank) && CheckingLeaks(rank)) {
      checking.push_back(rank.report.rank);
    }
  }
  if (checking.empty()) return false;
  if (first) {
    // Why the rest of the report comes later than the grace said.
    std::printf(
        "[ disttest ] %s: %s %s in LeakSanitizer's leak check after %s "
        "body; the failure grace waits for %s (at most %lld ms more)\n",
        group_.Subject().c_str(), RanksText(checking).c_str(),
        checking.size() == 1 ? "is" : "are",
        checking.size() == 1 ? "its" : "their",
        checking.size() == 1 ? "it" : "them",
        static_cast<long long>(Scaled(kLeakCheckWait).count()));
    std::fflush(stdout);
  }
  grace_deadline_ = now + std::chrono::milliseconds(kDrainTickMs);
  return true;
}

void Supervisor::OnVerdict(RankGroup::Rank& rank) {
  // A parked rank does not exit: its verdict starts the grace its exit
  // would (peers may wait for it in a collective).
  const RankVerdict verdict = *rank.report.done;
  if (!parks_ || verdict == RankVerdict::kPassed || grace_deadline_) return;
  StartGrace(rank, NameOf(verdict), verdict == RankVerdict::kSkipped);
}

void Supervisor::OnExit(RankGroup::Rank& rank) {
  // The test said it would end so (ExpectRankToEnd): its survivors go on,
  // to see what they see then.
  if (EndedAsExpected(rank.report)) return;
  const RankOutcome& o = *rank.report.outcome;
  bool passed = o.exited() && o.exit_code() == kExitPassed;
  const bool known = o.exited() && (o.exit_code() == kExitFailed ||
                                    o.exit_code() == kExitSkipped);
  // A rank that died (a signal, an exit of its own) is a failure that no
  // message of its own announced.
  // One that disttest ended after its verdict came had finished.
  if (!passed && !known && rank.report.killed_because.empty() &&
      !rank.report.killed_after_done) {
    StreamFirstFailure(rank, o.str());
  }
  if (passed || grace_deadline_ || !rank.report.killed_because.empty()) return;
  // Peers may be waiting for this rank in a collective that will never
  // complete: give them a grace period, then end them. Ranks that skip
  // usually all skip at once, so after a skip the others get longer before
  // they count as stuck.
  bool skipped = o.exited() && o.exit_code() == kExitSkipped;
  std::string how = skipped                                      ? "skipped"
                    : o.exited() && o.exit_code() == kExitFailed ? "failed"
                                                                 : o.str();
  StartGrace(rank, how, skipped);
}

void Supervisor::Run() {
  while (AnyRunning()) {
    Clock::time_point now = Clock::now();
    if (const int sig = PendingInterrupt(); sig != 0 && !interrupted_) {
      interrupted_ = true;
      KillStuck(
          fmt::format("disttest got {} while the test ran", InterruptText(sig)),
          /*deadline=*/true, kInterruptStacks);
      deadline_ = Clock::time_point::max();
      grace_deadline_.reset();
    } else if (now >= deadline_) {
      KillStuck(fmt::format("the test timed out after {} ms{}",
                            group_.spec().options.timeout.count(), ScaleNote()),
                /*deadline=*/true, kStackDeadline);
      deadline_ = Clock::time_point::max();  // Now only reaping is left.
    } else if (grace_deadline_ && now >= *grace_deadline_ &&
               !WaitForLeakChecks(now)) {
      KillStuck(grace_reason_, /*deadline=*/false, kStackDeadline);
    } else if (!grace_deadline_ && now >= next_match_) {
      if (const std::string differ = CallsThatDiffer(now); !differ.empty()) {
        next_match_ = Clock::time_point::max();  // Once: now they are ended.
        KillStuck(fmt::format("{}, and ranks wait in it", differ),
                  /*deadline=*/false, kStackDeadline);
      }
    } else if (!grace_deadline_ && now >= next_deadlock_) {
      next_deadlock_ = now + kMatchEvery;
      if (const std::string cycle = Deadlock(now); !cycle.empty()) {
        next_deadlock_ = next_match_ = Clock::time_point::max();
        KillStuck(cycle, /*deadline=*/false, kStackDeadline);
      }
    }
    if (!group_.accept_trouble().empty() && !resource_trouble_) {
      // A rank waits for a connection that will not be accepted: the test
      // cannot go on, and waiting for the timeout would blame the store.
      resource_trouble_ = true;
      group_.Kill(fmt::format("the harness ran out of resources: {}{}",
                              group_.accept_trouble(), OpenFilesLimitText()));
      grace_deadline_.reset();
    }
    if (heartbeat_.count() > 0 && now >= next_heartbeat_) {
      PrintHeartbeat(now);
      next_heartbeat_ = now + heartbeat_;
    }
    group_.Serve(PollTimeoutMs(now));
    FlushFirstFailure();
  }
  FlushFirstFailure();
}

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
    still[i] = p.blocked != 0 && !p.threads &&
               now - progress_since_[i] >= kStillFor &&
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
    if (still[i] && (views[i].written != progress_[i].written ||
                     views[i].blocked != progress_[i].blocked)) {
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

void Supervisor::KillStuck(const std::string& reason, bool deadline,
                           std::chrono::milliseconds stack_deadline) {
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
    std::vector<std::string> stacks =
        group_.spawner().Stacks(pids, stack_deadline);
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
  group_.Kill(reason);
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

std::vector<RankReport> RunTest(const TestSpec& spec,
                                std::unique_ptr<RankSpawner> spawner) {
  ValidateSpec(spec);
  RankGroup group(spec, std::move(spawner));
  Supervisor supervisor(group);  // The clock starts before the spawning.
  group.Start();
  supervisor.Run();
  return group.End("the test ended");
}

}  // namespace disttest::internal
