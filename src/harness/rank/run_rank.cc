// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/run_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <optional>

#include "base/threads.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "env/knobs.h"
#include "harness/rank/pooled_rank.h"
#include "harness/report/race_report.h"
#include "harness/report/sanitizer_report.h"

namespace disttest::internal {
namespace {

// While a rank waits for a debugger, nothing in any rank should time out.
constexpr std::chrono::hours kDebugTimeout(24);

}  // namespace

std::chrono::milliseconds RankTimeout(const RankEnv& env,
                                      std::chrono::milliseconds test) {
  std::optional<int> debug_rank = DebugRankVariable();
  if (debug_rank && *debug_rank < env.world_size) return kDebugTimeout;
  return test - std::min<std::chrono::milliseconds>(test / 10,
                                                    std::chrono::seconds(5));
}

RankVerdict RunProgram(RankProgram& program, const RankEnv& env,
                       Communicator* comm, Store& store,
                       const ReportFn& report) {
  RankVerdict verdict = program.Run(env, comm, store, report);
  // ThreadSanitizer's reports of this rank's accesses, failed or not: a
  // race is news of its own (race_report.h).
  if (std::optional<std::string> races = RacesOfThisRank()) {
    report({RankMessage::Kind::kNonFatalFailure, program.file(), program.line(),
            *races});
    verdict = RankVerdict::kFailed;
  }
  // A rank that failed is not checked: its failure is the news, and a
  // collective that failed may leave memory behind that is not the test's.
  // And the check is slow: it stops the rank's threads while it scans the
  // heap, which with hundreds of failing ranks on a few cores would outlast
  // the failure grace.
  // Rank threads share one heap: their process checks it once, after them
  // (thread_rank_host.cc).
  if (verdict == RankVerdict::kFailed || !LeakSanitizerRuns() ||
      ThreadsRank() >= 0) {
    return verdict;
  }
  EnterPhase(RankPhase::kCheckingLeaks);
  if (std::optional<std::string> leaks = LeaksOfThisTest()) {
    report({RankMessage::Kind::kFatalFailure, program.file(), program.line(),
            *leaks});
    verdict = RankVerdict::kFailed;
  }
  return verdict;
}

RankMessage MarkedIfItFollows(RankMessage m) {
  const bool failure = m.kind == RankMessage::Kind::kFatalFailure ||
                       m.kind == RankMessage::Kind::kNonFatalFailure;
  if (failure && !m.follows) m.follows = ReportsAnErrorOfAPeer(m.message);
  return m;
}

RankVerdict RunRank(RankProgram& program, const Options& options,
                    RankHost& host) {
  const ReportFn report = [&](const RankMessage& m) { host.Report(m); };
  // A forked rank inherits what its parent's communicators noted.
  ForgetErrorsOfPeers();
  RankVerdict verdict = RankVerdict::kFailed;
  Communicator* comm = nullptr;
  try {
    const RankEnv env = host.Enter();
    if (Ledger* ledger = Ledger::Current()) ledger->BeginTest();
    if (options.init_distributed) {
      EnterPhase(RankPhase::kConnecting);
      comm = host.Connect(env, options, RankTimeout(env, options.timeout));
      // Every rank of the test is connected before any body starts.
      comm->barrier();
      EnterPhase(RankPhase::kConnected);
    }
    // A pooled rank's first test: its threads from here on are the test's
    // (its next tests note theirs before their objects are made).
    if (PooledRank()) NoteThreadsBeforeTest();
    verdict = RunProgram(program, env, comm, host.store(), report);
  } catch (const std::exception& e) {
    report({RankMessage::Kind::kFatalFailure, program.file(), program.line(),
            fmt::format("disttest could not set up the rank: {}", e.what())});
    verdict = RankVerdict::kFailed;
  }
  EnterPhase(RankPhase::kFinished);
  return host.Finish(verdict, comm);
}

}  // namespace disttest::internal
