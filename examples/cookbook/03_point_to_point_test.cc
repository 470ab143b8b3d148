// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 3: point-to-point messages in a ring.
//
// send() completes when the peer has received (Gloo), so a ring in which
// every rank sends first deadlocks. Even ranks send first and odd ranks
// receive first; that works for any world size of 2 or more.
#include <disttest/disttest.h>

#include <vector>

namespace {

class PointToPoint : public disttest::DistributedTest {};

DIST_TEST_F(PointToPoint, RingPassesEachRanksBlockOn, 2, 3, 4) {
  const int n = world_size();
  const int next = (rank() + 1) % n;
  const int prev = (rank() + n - 1) % n;
  std::vector<int> out(16, rank()), in(16, -1);
  if (rank() % 2 == 0) {
    comm().send(out.data(), out.size(), next);
    comm().recv(in.data(), in.size(), prev);
  } else {
    comm().recv(in.data(), in.size(), prev);
    comm().send(out.data(), out.size(), next);
  }
  EXPECT_EQ(in, std::vector<int>(16, prev));
}

DIST_TEST_F(PointToPoint, BroadcastFromTheLastRank, 3) {
  int value = rank() == 2 ? 42 : -1;
  comm().broadcast(&value, 1, /*root=*/2);
  EXPECT_EQ(value, 42);
}

}  // namespace
