// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/pooled_rank.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>

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

// The process's threads as a pooled test began (a next test's: before its
// object was made; the first's: once the communicator was up), and those
// the first test object's constructor started before that, one test at a
// time.
std::vector<pid_t>& ThreadsBeforeTest() {
  static auto* threads = new std::vector<pid_t>;
  return *threads;
}
std::vector<pid_t>& ThreadsOfTheConstructor() {
  static auto* threads = new std::vector<pid_t>;
  return *threads;
}

bool In(const std::vector<pid_t>& sorted, pid_t tid) {
  return std::binary_search(sorted.begin(), sorted.end(), tid);
}

// The threads the test started that still run: "12345 \"my_tests\"".
std::vector<std::string> ThreadsLeft() {
  std::vector<std::string> left;
  for (const pid_t tid : ThreadIds()) {
    if ((!In(ThreadsBeforeTest(), tid) || In(ThreadsOfTheConstructor(), tid)) &&
        !ThreadEnded(tid)) {
      left.push_back(fmt::format("{} \"{}\"", tid, ThreadName(tid)));
    }
  }
  return left;
}

}  // namespace

void NoteThreadsBeforeTest() { ThreadsBeforeTest() = ThreadIds(); }

void NoteThreadsOfAConstructor(const std::vector<pid_t>& before) {
  std::vector<pid_t>& made = ThreadsOfTheConstructor();
  made.clear();
  for (const pid_t tid : ThreadIds()) {
    if (!In(before, tid)) made.push_back(tid);
  }
}

bool Reusable(Communicator* comm) {
  if (comm != nullptr && comm->failed()) return false;
  std::vector<std::string> left = ThreadsLeft();
  // A thread the test joined may still be listed for a moment after its
  // join returned (the kernel clears its id, which the join waits for,
  // before it leaves the list): a short, bounded look again.
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    poll(nullptr, 0, 1);
    left = ThreadsLeft();
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
    // parent that dies takes this process with it (its keeper, or
    // PR_SET_PDEATHSIG).
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
    // The test starts with its object (its constructor's end is said as
    // this test's, not the last one's).
    if (Ledger* ledger = Ledger::Current()) {
      ledger->BeginTest();
      ledger->Enter(RankPhase::kConnected);  // Since an earlier test.
    }
    // Its threads from here on are the test's, its object's constructor's
    // included.
    NoteThreadsBeforeTest();
    ThreadsOfTheConstructor().clear();
    try {
      std::unique_ptr<RankProgram> next = first.Next(*test);
      if (next == nullptr) {
        throw Error(
            fmt::format("this binary has no distributed test {}", *test));
      }
      PrefixStore own(PoolKey(n), store);
      // The errors peers caused in an earlier test are not this one's, nor
      // is a timeout it set (trial 12: a later test failed at 50 ms).
      ForgetErrorsOfPeers();
      if (comm != nullptr) comm->restore_timeout();
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
