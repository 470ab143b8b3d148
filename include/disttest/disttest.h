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
#ifndef DISTTEST_DISTTEST_H_
#define DISTTEST_DISTTEST_H_

#include "disttest/collective_assertions.h"
#include "disttest/comm/communicator.h"
#include "disttest/comm/create.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/distributed_fixture.h"
#include "disttest/distributed_test.h"
#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "disttest/harness/options.h"
#include "disttest/launch/config.h"
#include "disttest/launch/launch.h"
#include "disttest/launch/launcher_env.h"
#include "disttest/rendezvous/prefix_store.h"
#include "disttest/rendezvous/store.h"
#include "disttest/rendezvous/tcp_store.h"

#endif  // DISTTEST_DISTTEST_H_
