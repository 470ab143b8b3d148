// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/pooled_rank.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/threads.h"
#include "comm/host_arena.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "harness/rank/spawned_rank_host.h"

namespace disttest::internal {

std::string PoolKey(int n) { return fmt::format("disttest/pool/{}", n); }

bool PooledRank() { return std::getenv(env::kInternalPool) != nullptr; }

namespace {

std::vector<pid_t>& ThreadsBeforeTest() {
  static auto* threads = new std::vector<pid_t>;
  return *threads;
}

}  // namespace

void NoteThreadsBeforeTest() { ThreadsBeforeTest() = ThreadIds(); }

bool Reusable(Communicator* comm) {
  if (comm != nullptr && comm->failed()) return false;
  const std::vector<pid_t>& before = ThreadsBeforeTest();
  std::vector<std::string> left;
  for (const pid_t tid : ThreadIds()) {
    if (!std::binary_search(before.begin(), before.end(), tid)) {
      left.push_back(fmt::format("{} \"{}\"", tid, ThreadName(tid)));
    }
  }
  if (left.empty()) return true;
  std::cout.flush();
  std::fputs(fmt::format("disttest: note: the test left {} thread{} running "
                         "({}), which could still use the communicator: the "
                         "next test starts on new ranks\n",
                         left.size(), left.size() == 1 ? "" : "s",
                         fmt::join(left, ", "))
                 .c_str(),
             stderr);
  std::fflush(stderr);
  return false;
}

RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store, HostArena* arena,
                      const ReportFn& report) {
  const std::chrono::milliseconds timeout = store.timeout();
  for (int n = 1;; ++n) {
    // Parked, the communicator's event loop sleeps instead of waking every
    // 10 ms (and taking CPU from the tests that run meanwhile).
    if (comm != nullptr) comm->Park();
    // Waiting for the next test has no deadline: the parent decides, and a
    // parent that dies takes this process with it (PR_SET_PDEATHSIG).
    std::optional<std::string> test;
    if (arena != nullptr) test = arena->AwaitTest(static_cast<unsigned>(n));
    if (!test) {
      store.set_timeout(std::chrono::hours(24 * 365));
      std::vector<char> name = store.get(PoolKey(n));
      store.set_timeout(timeout);
      test.emplace(name.begin(), name.end());
    }
    if (test->empty()) return RankVerdict::kPassed;
    // Every rank has finished the last test: what it left running goes now.
    EndLeftovers("an earlier test on this rank");
    RankVerdict verdict = RankVerdict::kFailed;
    try {
      std::unique_ptr<RankProgram> next = first.Next(*test);
      if (next == nullptr) {
        throw Error(
            fmt::format("this binary has no distributed test {}", *test));
      }
      PrefixStore own(PoolKey(n), store);
      // The errors peers caused in an earlier test are not this one's.
      ForgetErrorsOfPeers();
      if (Ledger* ledger = Ledger::Current()) {
        ledger->BeginTest();
        ledger->Enter(RankPhase::kConnected);  // Since an earlier test.
      }
      verdict = RunProgram(*next, env, comm, own, report);
      EnterPhase(RankPhase::kFinished);
    } catch (const std::exception& e) {
      report({RankMessage::Kind::kFatalFailure, first.file(), first.line(),
              fmt::format("a pooled rank could not start {}: {}", *test,
                          e.what())});
    }
    const bool again = Succeeded(verdict) && Reusable(comm);
    if (again && arena != nullptr) {
      arena->Park(env.rank, static_cast<unsigned>(n + 1));
    }
    ReportVerdict(report, verdict);
    if (!again) return verdict;
  }
}

}  // namespace disttest::internal
