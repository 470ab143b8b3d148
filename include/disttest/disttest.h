// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest: distributed unit tests for GoogleTest. The one header to include.
//
//   #include <disttest/disttest.h>
//
//   class Collectives : public disttest::DistributedTest {};
//
//   DIST_TEST_F(Collectives, Broadcast, 2, 4) {
//     int value = rank() == 0 ? 42 : 0;
//     comm().broadcast(&value, 1, /*root=*/0);
//     EXPECT_EQ(value, 42);
//   }
//
// Link disttest::disttest and GTest::gtest_main (or your own main).
//
// It gives a test author what a test uses: the fixture and DIST_TEST_F,
// options(), the communicator, the errors, the collective assertions, and
// CurrentRank() for code under test that has no fixture at hand.
// gtest-spi.h's *_ON_ALL_THREADS macros come with it, refused where the
// ranks are threads (internal/gtest_spi.h).
// The rest is included on purpose, where it is used:
//   <disttest/launch/launch.h>          launch(), Context (InternLM-style)
//   <disttest/launch/launcher_env.h>    who this process is to its launcher
//   <disttest/comm/create.h>            a communicator of your own
//   <disttest/rendezvous/tcp_store.h>   the store's client (and its
//   <disttest/rendezvous/tcp_store_server.h>  server), prefix_store.h
//   <disttest/env/rank_env.h>           RankEnv, the rank's variables
// A program that only calls launch() links disttest::core: no GoogleTest.
#ifndef DISTTEST_DISTTEST_H_
#define DISTTEST_DISTTEST_H_

#include "disttest/collective_assertions.h"
#include "disttest/comm/communicator.h"
#include "disttest/current_rank.h"
#include "disttest/distributed_fixture.h"
#include "disttest/distributed_test.h"
#include "disttest/error.h"
#include "disttest/harness/options.h"
#include "disttest/internal/gtest_spi.h"

#endif  // DISTTEST_DISTTEST_H_
