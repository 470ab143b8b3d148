// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A launched rank's liveness, against a real store: a rank that joined and
// then never beat (its first heartbeat lost with its link) is named as
// silent within the heartbeat bound, not waited for until the deadline; one
// that never joined is still starting.
#include "harness/launched/liveness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "disttest/rendezvous/tcp_store.h"
#include "harness/launched/keys.h"
#include "rendezvous/server_thread.h"

namespace disttest::internal::launched {
namespace {

using ::disttest::testing::ServerThread;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

class LivenessTest : public ::testing::Test {
 protected:
  LivenessTest() {
    main_ = std::make_unique<TcpStore>("127.0.0.1", server_.port(),
                                       milliseconds(5000));
    side_.store = std::make_unique<TcpStore>("127.0.0.1", server_.port(),
                                             milliseconds(5000));
  }
  ServerThread server_;
  std::unique_ptr<TcpStore> main_;
  SideChannel side_;
};

TEST_F(LivenessTest, ARankThatJoinedAndNeverBeatIsNamedAsSilent) {
  Liveness liveness(0, 2, main_, side_);
  main_->set(JoinedKey(1), "node2");
  // The bound: the heartbeat's (5 s, scaled) and a look a second; far
  // before this deadline.
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  std::map<int, std::string> missing =
      liveness.AwaitResults({"done/1"}, {1}, deadline);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_THAT(missing[1], HasSubstr("sent no heartbeat in the "));
  EXPECT_THAT(missing[1], HasSubstr(" ms since it joined: it died, or its "
                                    "machine stalls"));
  EXPECT_LT(Clock::now(), deadline);
}

TEST_F(LivenessTest, ARankThatNeverJoinedIsWaitedForUntilTheDeadline) {
  Liveness liveness(0, 2, main_, side_);
  std::map<int, std::string> missing =
      liveness.AwaitResults({"done/1"}, {1}, Clock::now() + milliseconds(1500));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[1], kStuck);
}

}  // namespace
}  // namespace disttest::internal::launched
