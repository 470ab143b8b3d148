// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Deadlocks from ledgers made by hand: each cycle the finder must name, and
// each look-alike it must not (a posted receive, a rank that may move, a
// ledger that lost the entries its counts need).
#include "harness/report/deadlock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;

// One rank's ledger: communicator 0 is the world (its rank there is its
// rank); others are added with Comm().
class Rank {
 public:
  Rank(int rank, int world) {
    view_.rank = rank;
    view_.read_ns = 10'000'000'000;
    Comm("world", 1, rank, world);
  }
  Rank& Comm(const std::string& name, std::uint64_t key, int rank, int size) {
    view_.comms.push_back(name);
    view_.keys.push_back(key);
    view_.comm_ranks.push_back(rank);
    view_.comm_sizes.push_back(size);
    view_.digests.emplace_back();
    return *this;
  }
  // A call on communicator `comm`; `open`: still in it (the newest open
  // one is the one the rank blocks in, when `blocks`).
  Rank& Call(LedgerOp op, int peer, std::uint32_t tag, bool open,
             std::uint32_t comm = 0, std::uint64_t count = 1,
             bool blocks = true) {
    LedgerRecord r;
    r.index = view_.written++;
    r.comm = comm;
    r.op = op;
    r.type = DataType::kInt32;
    r.count = count;
    r.peer = peer;
    r.tag = tag;
    r.file = "/src/t.cc";
    r.line = 10 + static_cast<std::uint32_t>(r.index);
    r.state = open ? LedgerState::kEntered : LedgerState::kCompleted;
    r.seq = 0;
    for (const LedgerRecord& o : view_.records) {
      if (o.comm == comm && o.collective() == r.collective()) ++r.seq;
    }
    view_.records.push_back(r);
    if (open && blocks) view_.blocked = r.index + 1;
    return *this;
  }
  Rank& Threads() {
    view_.threads = true;
    return *this;
  }
  Rank& Dropped() {
    view_.dropped = 3;
    return *this;
  }
  RankLedgerView view() const { return view_; }

 private:
  RankLedgerView view_;
};

std::string Find(const std::vector<Rank>& ranks, std::vector<bool> still = {},
                 std::vector<bool> finished = {}) {
  std::vector<RankLedgerView> views;
  for (const Rank& r : ranks) views.push_back(r.view());
  if (still.empty()) still.assign(views.size(), true);
  if (finished.empty()) finished.assign(views.size(), false);
  return FindDeadlock(views, still, finished);
}

TEST(DeadlockTest, SendAgainstAReceiveOfAnotherTag) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kSend, 1, 1, true);
  r[1].Call(LedgerOp::kRecv, 0, 2, true);
  EXPECT_EQ(Find(r),
            "ranks 0-1 wait for each other and none can go on (a deadlock): "
            "rank 0 waits in send(1 x int32 to rank 1, tag 1) at t.cc:10, "
            "which rank 1 has posted no receive for; rank 1 waits in recv(1 x "
            "int32 from rank 0, tag 2) at t.cc:10, which rank 0 has not sent");
}

TEST(DeadlockTest, APostedReceiveOfTheKindIsNoDeadlock) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kSend, 1, 1, true);
  // Rank 1 posted an irecv of tag 1 (not waited for), then blocks in tag 2.
  r[1].Call(LedgerOp::kRecv, 0, 1, true, 0, 1, /*blocks=*/false);
  r[1].Call(LedgerOp::kRecv, 0, 2, true);
  EXPECT_EQ(Find(r), "");
}

TEST(DeadlockTest, AMessageAlreadySentIsNoDeadlock) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  // Rank 0's send of tag 2 completed (buffered); rank 0 now waits for a
  // reply that rank 1 sends once its receive returns.
  r[0].Call(LedgerOp::kSend, 1, 2, false);
  r[0].Call(LedgerOp::kRecv, 1, 3, true);
  r[1].Call(LedgerOp::kRecv, 0, 2, true);
  EXPECT_EQ(Find(r), "");
}

TEST(DeadlockTest, ASecondSendOfTheKindNeedsASecondReceive) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kSend, 1, 1, false);
  r[0].Call(LedgerOp::kSend, 1, 1, true);
  r[1].Call(LedgerOp::kRecv, 0, 1, false);
  r[1].Call(LedgerOp::kRecv, 0, 7, true);
  EXPECT_THAT(Find(r), HasSubstr("rank 0 waits in send(1 x int32 to rank 1, "
                                 "tag 1) at t.cc:11, which rank 1 has posted "
                                 "no receive for"));
}

TEST(DeadlockTest, AReceiveOfAnotherCountDoesNotPair) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kSend, 1, 1, true, 0, 8);
  r[1].Call(LedgerOp::kRecv, 0, 1, true, 0, 16);
  EXPECT_THAT(Find(r),
              HasSubstr("which rank 1's recv(16 x int32 from rank 0, tag 1) "
                        "at t.cc:10 does not pair with (a message pairs only "
                        "with a receive of the same tag, element type and "
                        "count)"));
}

TEST(DeadlockTest, ARankThatMayMoveBreaksTheCycle) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kSend, 1, 1, true);
  r[1].Call(LedgerOp::kRecv, 0, 2, true);
  EXPECT_EQ(Find(r, {true, false}), "");  // Rank 1 moved since.
  std::vector<Rank> threads = r;
  threads[1].Threads();  // Another thread of rank 1 may yet receive.
  EXPECT_EQ(Find(threads), "");
  std::vector<Rank> dropped = r;
  dropped[0].Dropped();  // Its counts would not be whole.
  EXPECT_EQ(Find(dropped), "");
}

TEST(DeadlockTest, ARingWhereEveryRankReceivesFirst) {
  std::vector<Rank> r;
  for (int i = 0; i < 8; ++i) r.emplace_back(i, 8);
  for (int i = 0; i < 8; ++i) r[i].Call(LedgerOp::kRecv, (i + 7) % 8, 0, true);
  const std::string found = Find(r);
  EXPECT_THAT(found, HasSubstr("ranks 0-7 wait for each other"));
  EXPECT_THAT(found, HasSubstr("rank 0 waits in recv(1 x int32 from rank 7, "
                               "tag 0) at t.cc:10, which rank 7 has not sent; "
                               "rank 7 waits in recv"));
  EXPECT_THAT(found, HasSubstr("... (8 ranks in the cycle)"));
  // One rank that receives its message breaks it.
  r[3] = Rank(3, 8);
  r[3].Call(LedgerOp::kSend, 4, 0, false);
  r[3].Call(LedgerOp::kRecv, 2, 0, true);
  EXPECT_EQ(Find(r), "");
}

TEST(DeadlockTest, ASplitCommunicatorNamesTheRanksBothWays) {
  std::vector<Rank> r{Rank(0, 4), Rank(1, 4), Rank(2, 4), Rank(3, 4)};
  // {0, 2} and {1, 3}; each receives from the other first.
  for (int i = 0; i < 4; ++i) {
    r[i].Comm(i % 2 == 0 ? "evens" : "odds", i % 2 == 0 ? 20 : 21, i / 2, 2);
    r[i].Call(LedgerOp::kRecv, 1 - i / 2, 4, true, 1);
  }
  const std::string found = Find(r);
  EXPECT_THAT(found, HasSubstr("ranks 0, 2 wait for each other"));
  EXPECT_THAT(found, HasSubstr("rank 0 waits in recv(1 x int32 from rank 1, "
                               "tag 4) on evens at t.cc:10, which rank 2 "
                               "(rank 1 there) has not sent"));
  EXPECT_THAT(found, HasSubstr("ranks 1, 3 are in a deadlock of their own"));
}

TEST(DeadlockTest, ARankThatWaitsOnACycleIsNamedBehindIt) {
  std::vector<Rank> r{Rank(0, 3), Rank(1, 3), Rank(2, 3)};
  r[0].Call(LedgerOp::kSend, 1, 1, true);
  r[1].Call(LedgerOp::kRecv, 0, 2, true);
  r[2].Call(LedgerOp::kRecv, 0, 5, true);  // Waits on rank 0.
  EXPECT_THAT(Find(r), HasSubstr("; rank 2 waits on them"));
}

TEST(DeadlockTest, ACollectiveWithAMemberNoLedgerNamesIsNotGuessed) {
  std::vector<Rank> r{Rank(0, 3), Rank(1, 3), Rank(2, 3)};
  for (int i = 0; i < 2; ++i) r[i].Comm("trio", 40, i, 3);
  r[0].Call(LedgerOp::kAllReduce, -1, 0, true, 1);
  r[1].Call(LedgerOp::kRecv, 0, 1, true);
  EXPECT_EQ(Find(r), "");  // Rank 2 never made "trio": who is its third?
}

TEST(DeadlockTest, ASendAgainstACollectiveOfTheWorld) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kBarrier, -1, 0, false);
  r[1].Call(LedgerOp::kBarrier, -1, 0, false);
  r[0].Call(LedgerOp::kSend, 1, 3, true);
  r[1].Call(LedgerOp::kAllReduce, -1, 0, true);
  EXPECT_THAT(Find(r), HasSubstr("rank 1 waits in allreduce(1 x int32, sum) "
                                 "at t.cc:11, which rank 0 has not entered"));
}

TEST(DeadlockTest, RanksAllInOneCollectiveAreNoDeadlockOfThese) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kAllReduce, -1, 0, true);
  r[1].Call(LedgerOp::kAllReduce, -1, 0, true);
  EXPECT_EQ(Find(r), "");
}

TEST(DeadlockTest, ARankPastTheCollectiveIsNotWaitedFor) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Call(LedgerOp::kAllReduce, -1, 0, true);
  r[1].Call(LedgerOp::kAllReduce, -1, 0, false);  // Returned already.
  r[1].Call(LedgerOp::kRecv, 0, 1, true);
  EXPECT_EQ(Find(r), "");
}

TEST(DeadlockTest, AReceiveFromARankThatFinished) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[1].Call(LedgerOp::kRecv, 0, 9, true);
  EXPECT_EQ(Find(r, {false, true}, {true, false}),
            "rank 1 waits for rank 0, which has finished its test, and cannot "
            "go on (a deadlock): rank 1 waits in recv(1 x int32 from rank 0, "
            "tag 9) at t.cc:10, which rank 0 has not sent");
  // Sent before it finished: the message comes.
  r[0].Call(LedgerOp::kSend, 1, 9, false);
  EXPECT_EQ(Find(r, {false, true}, {true, false}), "");
}

TEST(DeadlockTest, APeerNoLedgerNamesIsNotGuessed) {
  std::vector<Rank> r{Rank(0, 2), Rank(1, 2)};
  r[0].Comm("mine", 30, 0, 2);
  r[0].Call(LedgerOp::kRecv, 1, 0, true, 1);
  r[1].Call(LedgerOp::kRecv, 0, 0, true);  // Never made "mine".
  EXPECT_EQ(Find(r), "");
}

}  // namespace
}  // namespace disttest::internal
