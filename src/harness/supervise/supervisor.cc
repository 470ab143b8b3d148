// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The run of one test: the poll loop and its deadlines, the failure grace
// (and the leak checks it waits for), the first failure as it comes, and
// the heartbeat. Finding ranks that cannot go on is supervisor_deadlock.cc,
// killing the stuck ones supervisor_stuck.cc.
#include "harness/supervise/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/process/descendants.h"
#include "harness/process/resources.h"
#include "harness/report/rank_failures.h"
#include "harness/report/verdict.h"
#include "harness/supervise/supervisor_looks.h"

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
      backend > static_cast<int>(Backend::kMpi)) {
    throw ConfigError(
        fmt::format("options().backend has the unknown value {}", backend));
  }
  auto launch = static_cast<int>(spec.options.launch);
  if (launch != static_cast<int>(LaunchMode::kFork) &&
      launch != static_cast<int>(LaunchMode::kExec) &&
      launch != static_cast<int>(LaunchMode::kThreads)) {
    throw ConfigError(
        fmt::format("options().launch has the unknown value {}", launch));
  }
  if (spec.options.failure_grace.count() < 0) {
    throw ConfigError("options().failure_grace must not be negative");
  }
  if (spec.options.master_addr.empty()) {
    throw ConfigError(
        "options().master_addr is empty: it is the address the test's store "
        "listens on and its ranks bind to (\"127.0.0.1\" unless set)");
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
        rank,
        m.file.empty() ? m.message
                       : fmt::format("at {}:{}: {}", m.file.substr(slash + 1),
                                     m.line, m.message),
        m.follows);
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
  if (debug_rank && *debug_rank >= group_.spec().world_size) {
    // Not an error (the run's other tests may have that rank), but said:
    // nobody waits at a debugger for a rank that this test does not have.
    std::printf(
        "[ disttest ] %s=%d, but %s has ranks 0-%d: none of them waits for "
        "a debugger\n",
        env::kDebugRank, *debug_rank, group_.spec().name.c_str(),
        group_.spec().world_size - 1);
    std::fflush(stdout);
  }
}

Supervisor::~Supervisor() {
  // Failures read after Run() (the group's last drain) are streamed too.
  FlushFirstFailure(/*last=*/true);
  group_.OnVerdict(nullptr);
  group_.OnExit(nullptr);
  group_.OnFailure(nullptr);
}

void Supervisor::StreamFirstFailure(const RankGroup::Rank& rank,
                                    const std::string& what, bool follows) {
  if (failure_streamed_ || pending_failure_ || follows) {
    return;
  }
  // Printed once the poll loop has read every rank's results this turn
  // (FlushFirstFailure): one that came in the same turn may be its cause.
  pending_failure_ =
      PendingFailure{&rank, what,
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         Clock::now() - start_)};
}

void Supervisor::FlushFirstFailure(bool last) {
  if (!pending_failure_) return;
  // A rank that skipped while this one ran, where the test allows no
  // partial skip, came first: its skip is the failure, this one follows
  // (its collective found that rank's body gone). Not where this rank
  // skipped too, after its failure: then every rank may have skipped, and
  // its failure is the test's. That is known once it is done: until then
  // the line waits (at most a second, and not past the last flush).
  const RankGroup::Rank* skipped = nullptr;
  if (group_.spec().options.skip_policy != SkipPolicy::kAllowPartial) {
    for (const RankGroup::Rank& other : group_.ranks()) {
      if (&other != pending_failure_->rank &&
          other.report.done == RankVerdict::kSkipped) {
        skipped = &other;
        break;
      }
    }
  }
  if (skipped != nullptr) {
    const RankGroup::Rank& failed = *pending_failure_->rank;
    const bool waited = Clock::now() - start_ - pending_failure_->after >=
                        std::chrono::seconds(1);
    if (!last && !waited && !failed.report.done.has_value() && !Ended(failed)) {
      return;
    }
    if (FirstSkip(failed.report) != nullptr) skipped = nullptr;
  }
  PendingFailure first = std::move(*pending_failure_);
  pending_failure_.reset();
  if (failure_streamed_) return;
  failure_streamed_ = true;
  if (skipped != nullptr) {
    const RankMessage* skip = FirstSkip(skipped->report);
    const std::string reason = skip != nullptr ? skip->message : "";
    first.rank = skipped;
    first.what = reason.empty()
                     ? std::string("it skipped while the other ranks ran")
                     : fmt::format(
                           "it skipped (\"{}\") while the other "
                           "ranks ran",
                           reason);
  }
  // One line of it: the whole message comes with the verdict.
  constexpr std::size_t kMaxText = 300;
  std::string text = first.what.substr(0, first.what.find('\n'));
  if (text.size() > kMaxText) {
    text.resize(kMaxText);
    text += " ...";
  }
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
  // A parked rank does not exit, nor does a rank thread whose peers still
  // run: its verdict starts the grace its exit would (peers may wait for it
  // in a collective).
  const RankVerdict verdict = *rank.report.done;
  if (!(parks_ || rank.thread) || verdict == RankVerdict::kPassed ||
      grace_deadline_) {
    return;
  }
  StartGrace(rank, NameOf(verdict), verdict == RankVerdict::kSkipped);
}

void Supervisor::OnExit(RankGroup::Rank& rank) {
  // The test said it would end so (ExpectRankToEnd): its survivors go on,
  // to see what they see then.
  if (EndedAsExpected(rank.report)) return;
  if (!rank.report.outcome) {
    // Reaped by other code of the test process: how it ended is unknown,
    // which is a failure; its peers get the grace a failed rank's get.
    if (rank.report.killed_because.empty()) {
      StreamFirstFailure(rank, std::string(kReapedByOthers),
                         /*follows=*/false);
      if (!grace_deadline_) {
        StartGrace(rank, "was reaped by other code in the test process", false);
      }
    }
    return;
  }
  const RankOutcome& o = *rank.report.outcome;
  bool passed = o.exited() && o.exit_code() == kExitPassed;
  // Failed or skipped as disttest's code says it, not by the test's own
  // exit(81) or exit(82).
  const LedgerMemory* ledger = group_.ledger();
  const std::optional<RankPhase> phase =
      ledger != nullptr
          ? std::optional<RankPhase>(ledger->Phase(rank.report.rank))
          : std::nullopt;
  const bool failed = EndedWithDisttestsStatus(o, kExitFailed, phase);
  const bool skipped = EndedWithDisttestsStatus(o, kExitSkipped, phase);
  const bool known = failed || skipped;
  // A rank that died (a signal, an exit of its own) is a failure that no
  // message of its own announced.
  // One that disttest ended after its verdict came had finished.
  if (!passed && !known && rank.report.killed_because.empty() &&
      !rank.report.killed_after_done) {
    StreamFirstFailure(rank, o.str(), /*follows=*/false);
  }
  if (passed || grace_deadline_ || !rank.report.killed_because.empty()) return;
  // Peers may be waiting for this rank in a collective that will never
  // complete: give them a grace period, then end them. Ranks that skip
  // usually all skip at once, so after a skip the others get longer before
  // they count as stuck.
  std::string how = skipped ? "skipped" : failed ? "failed" : o.str();
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
      KillStuck(grace_reason_, /*deadline=*/false, kStackDeadline,
                RankReport::KilledFor::kPeersFailure);
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
  FlushFirstFailure(/*last=*/true);
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
