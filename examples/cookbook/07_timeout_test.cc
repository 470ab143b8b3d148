// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 7: time limits.
//
// options().timeout bounds the whole test (spawn, rendezvous, body, exit of
// every rank); at the limit disttest prints the stack of every thread of
// each rank still running, kills it and fails the test, naming the rank:
//   [rank 3/4] was killed by disttest: the test timed out after 20000 ms;
//   it was here: ...
// DISTTEST_TIMEOUT=seconds overrides it for a whole run (a slow CI
// machine, a debugging session). options().failure_grace is how long the
// other ranks may go on once one rank has failed (they are probably
// blocked in a collective with it).
#include <disttest/disttest.h>

#include <chrono>
#include <thread>

namespace {

class Straggler : public disttest::DistributedTest {
 protected:
  Straggler() {
    options().timeout = std::chrono::seconds(20);
    options().failure_grace = std::chrono::milliseconds(500);
  }
};

DIST_TEST_F(Straggler, OthersWaitForTheSlowRank, 3) {
  if (rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  comm().barrier();  // ranks 0 and 1 wait here, well within the limit
  int arrived = 1;
  comm().allreduce(&arrived, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(arrived, 3);
}

}  // namespace
