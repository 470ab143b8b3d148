// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The child binary of sanitizer_test's race cases, built with
// ThreadSanitizer: ranks that write one global (a race that a process per
// rank hides and rank threads share), a rank whose own two threads race,
// and ranks that write only their own. Launched as threads unless
// RACE_LAUNCH=fork. Nothing here is run on its own by ctest.
#include <disttest/disttest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

int g_calls = 0;  // One per process: every rank thread's.

__attribute__((noinline)) void CountCall() {
  g_calls = g_calls + 1;  // marker-race
}

class Raced : public disttest::DistributedTest {
 protected:
  Raced() {
    const char* mode = std::getenv("RACE_LAUNCH");
    options().launch = mode != nullptr && std::string(mode) == "fork"
                           ? disttest::LaunchMode::kFork
                           : disttest::LaunchMode::kThreads;
  }
};

// Every rank counts, then waits for the others: no rank goes on (to what
// might order it before a later rank's count, a lock it reports under)
// until every rank has counted, unordered.
DIST_TEST_F(Raced, EveryRankCountsInOneGlobal, 4) {
  CountCall();
  comm().barrier();
}

// Rank 1 and a thread it starts count, unordered; rank 0 does not count.
// Either may come second and find the race (the sleep makes it likelier
// that each test's own does): rank 1's failure either way.
DIST_TEST_F(Raced, ARanksOwnThreadsRaceFoundByTheRank, 2) {
  if (rank() != 1) return;
  std::thread helper(CountCall);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CountCall();
  helper.join();
}

DIST_TEST_F(Raced, ARanksOwnThreadsRaceFoundByItsThread, 2) {
  if (rank() != 1) return;
  std::thread helper([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CountCall();
  });
  CountCall();
  helper.join();
}

// Each rank writes its own element, then reads the others' after a
// collective: ordered, no race. (As processes each rank sees its own.)
DIST_TEST_F(Raced, EachRankWritesItsOwn, 4) {
  static std::array<int, 4> counts{};
  counts[static_cast<std::size_t>(rank())] = rank() + 1;
  comm().barrier();
  int sum = 0;
  for (int c : counts) sum += c;
  EXPECT_EQ(sum, options().launch == disttest::LaunchMode::kThreads
                     ? 10
                     : rank() + 1);
  comm().barrier();
}

}  // namespace
