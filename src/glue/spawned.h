// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A spawned test, both ends: the parent plans its steps (its distributed
// fixtures, then the test), spawns or reuses each step's ranks, supervises
// them and re-raises their verdict; each rank runs its part of the test.
//
//   Supervise(test);                     // DistributedTest::TestBody, parent
//   RunAsRank(test, fixture, arena, forked);  // a rank, never returns
#ifndef DISTTEST_SRC_GLUE_SPAWNED_H_
#define DISTTEST_SRC_GLUE_SPAWNED_H_

#include <memory>

#include "comm/host_arena.h"
#include "disttest/distributed_test.h"

namespace disttest::internal {

// The parent's side of a test: each step in turn, until one fails or skips.
void Supervise(DistributedTest& test);

// A rank's side of the test's step `fixture` (the index of the
// DistributedFixture it runs, or -1 for the test itself); ends the process.
// `no_body`: a re-executed rank whose body gtest did not run; `test` is a
// stand-in, none of whose code runs: the rank reports what gtest recorded.
[[noreturn]] void RunAsRank(DistributedTest& test, int fixture,
                            std::shared_ptr<HostArena> arena, bool forked,
                            bool no_body = false);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_SPAWNED_H_
