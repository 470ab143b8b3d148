// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The hang paragraph from ledgers made by hand: each way ranks can fall out
// of step, as the parent reads it; and messages that did not pair.
#include "harness/report/collective_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/ledger_area.h"

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::int64_t kSecond = 1000000000;
constexpr std::int64_t kNow = 100 * kSecond;

// Builds one rank's ledger: its communicators' records, oldest first.
class RankBuilder {
 public:
  explicit RankBuilder(int rank) {
    state_.rank = rank;
    view_.rank = rank;
    view_.read_ns = kNow;
    Comms({"world"});
    view_.phase_ns[static_cast<std::size_t>(RankPhase::kBody)] = kSecond;
  }
  // A collective on communicator `comm` (0: world) entered at `entered`
  // seconds, ended at `ended` (< 0: still in it).
  RankBuilder& Op(LedgerOp op, std::uint64_t count, double entered,
                  double ended, int line, LedgerState state = {},
                  std::uint32_t comm = 0, int root = -1) {
    LedgerRecord r;
    r.index = view_.records.size();
    r.comm = comm;
    r.op = op;
    r.type = DataType::kFloat32;
    r.count = count;
    r.peer = root;
    r.file = "/src/model_test.cc";
    r.line = static_cast<std::uint32_t>(line);
    r.entered_ns = static_cast<std::int64_t>(entered * kSecond);
    r.ended_ns = ended < 0 ? 0 : static_cast<std::int64_t>(ended * kSecond);
    r.state = state != LedgerState{} ? state
              : ended < 0            ? LedgerState::kEntered
                                     : LedgerState::kCompleted;
    // Numbered from 0 per communicator, as the ledger does.
    r.seq = 0;
    for (const LedgerRecord& o : view_.records) {
      if (o.comm == comm && o.collective() == r.collective()) ++r.seq;
    }
    view_.records.push_back(r);
    return *this;
  }
  RankBuilder& Phase(RankPhase p, double at) {
    view_.phase_ns[static_cast<std::size_t>(p)] =
        static_cast<std::int64_t>(at * kSecond);
    return *this;
  }
  // The communicators, by id; ranks that name one alike made one.
  RankBuilder& Comms(std::vector<std::string> names) {
    view_.keys.clear();
    for (const std::string& n : names) view_.keys.push_back(LedgerKey(n));
    view_.comms = std::move(names);
    return *this;
  }
  RankBuilder& Ended(std::string how) {
    state_.ended = std::move(how);
    return *this;
  }
  RankBuilder& At(std::string where) {
    state_.now_at = std::move(where);
    state_.stack = true;
    return *this;
  }
  RankState Done() {
    state_.ledger = view_;
    return state_;
  }

 private:
  RankState state_;
  RankLedgerView view_;
};

// Ranks 0-2 in step up to #2; then in #3, for 30 s; rank 3 completed #2
// and is elsewhere.
std::vector<RankState> OneRankElsewhere(int world) {
  std::vector<RankState> ranks;
  for (int r = 0; r < world - 1; ++r) {
    ranks.push_back(
        RankBuilder(r)
            .Op(LedgerOp::kBarrier, 0, 1, 1.1, 10)
            .Op(LedgerOp::kBroadcast, 16, 2, 2.2, 57, LedgerState{}, 0, 0)
            .Op(LedgerOp::kAllReduce, 8, 70, -1, 42)
            .Done());
  }
  ranks.push_back(
      RankBuilder(world - 1)
          .Op(LedgerOp::kBarrier, 0, 1, 1.1, 10)
          .Op(LedgerOp::kBroadcast, 16, 2, 2.2, 57, LedgerState{}, 0, 0)
          .At("model_test.cc:88")
          .Done());
  return ranks;
}

TEST(CollectiveReportTest, NamesTheCollectiveWhoIsInItAndWhoIsNot) {
  const std::string text = CollectiveReport(OneRankElsewhere(4));
  EXPECT_EQ(text,
            "collective #2 on the world communicator never completed:\n"
            "  ranks 0-2 (3 ranks) are in allreduce(8 x float32, sum) at "
            "model_test.cc:42, for 30.0 s\n"
            "  rank 3 is not in it: its last collective, #1 broadcast(16 x "
            "float32, root 0) at model_test.cc:57, completed 97.8 s ago; it "
            "is now at model_test.cc:88 (stack below)");
}

TEST(CollectiveReportTest, At128RanksItIsStillTwoGroups) {
  const std::string text = CollectiveReport(OneRankElsewhere(128));
  EXPECT_THAT(text, HasSubstr("  ranks 0-126 (127 ranks) are in allreduce"));
  EXPECT_THAT(text, HasSubstr("  rank 127 is not in it"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST(CollectiveReportTest, RanksInDifferentOperationsDoNotMatch) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 90, -1, 42).Done(),
      RankBuilder(1)
          .Op(LedgerOp::kBroadcast, 8, 90, -1, 50, LedgerState{}, 0, 0)
          .Done(),
  };
  EXPECT_EQ(CollectiveReport(ranks),
            "collective #0 on the world communicator does not match across "
            "the ranks:\n"
            "  rank 0 is in allreduce(8 x float32, sum) at model_test.cc:42, "
            "for 10.0 s\n"
            "  rank 1 is in broadcast(8 x float32, root 0) at "
            "model_test.cc:50, for 10.0 s");
}

TEST(CollectiveReportTest, TheSameOperationWithAnotherCountDoesNotMatch) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 90, -1, 42).Done(),
      RankBuilder(1).Op(LedgerOp::kAllReduce, 16, 90, -1, 42).Done(),
  };
  const std::string text = CollectiveReport(ranks);
  EXPECT_THAT(text, HasSubstr("does not match across the ranks"));
  EXPECT_THAT(text, HasSubstr("rank 1 is in allreduce(16 x float32, sum)"));
}

TEST(CollectiveReportTest, ARankThatNeverReachedACollectiveSaysWhere) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kBarrier, 0, 90, -1, 10).Done(),
      RankBuilder(1).Phase(RankPhase::kBody, 0).At("model_test.cc:20").Done(),
  };
  ranks[1].ledger->phase_ns = {};
  ranks[1].ledger->phase_ns[static_cast<std::size_t>(RankPhase::kConnecting)] =
      95 * kSecond;
  EXPECT_EQ(CollectiveReport(ranks),
            "collective #0 on the world communicator never completed:\n"
            "  rank 0 is in barrier() at model_test.cc:10, for 10.0 s\n"
            "  rank 1 is not in it: it has entered no collective on the world "
            "communicator in this test; it is still connecting its "
            "communicator, for 5.0 s");
}

TEST(CollectiveReportTest, ARankThatLeftItsBodyWhileOthersWaitSaysWhen) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 90, -1, 42).Done(),
      RankBuilder(1).Phase(RankPhase::kFinished, 97.5).Done(),
  };
  EXPECT_THAT(
      CollectiveReport(ranks),
      HasSubstr(
          "rank 1 is not in it: it has entered no collective "
          "on the world communicator in this test; its test ended 2.5 s ago "
          "(it waits for the others)"));
}

TEST(CollectiveReportTest, ADeadRankAndThePeersThatGaveUp) {
  std::vector<RankState> ranks = {
      RankBuilder(0)
          .Op(LedgerOp::kAllReduce, 8, 90, 90.3, 42, LedgerState::kFailed)
          .Done(),
      RankBuilder(1)
          .Op(LedgerOp::kAllReduce, 8, 90, 90.3, 42, LedgerState::kFailed)
          .Done(),
      RankBuilder(2).Ended("killed by signal 9 (SIGKILL)").Done(),
  };
  EXPECT_EQ(
      CollectiveReport(ranks),
      "collective #0 on the world communicator never completed:\n"
      "  ranks 0-1 (2 ranks) failed in allreduce(8 x float32, sum) at "
      "model_test.cc:42 after 300 ms\n"
      "  rank 2 is not in it: it has entered no collective on the world "
      "communicator in this test; it ended: killed by signal 9 (SIGKILL)");
}

TEST(CollectiveReportTest, ARankInASendIsNamedWithIt) {
  LedgerRecord send;
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 90, -1, 42).Done(),
      RankBuilder(1).Op(LedgerOp::kSend, 4, 95, -1, 61, {}, 0, 0).Done(),
  };
  EXPECT_THAT(
      CollectiveReport(ranks),
      HasSubstr(
          "rank 1 is not in it: it has entered no collective on "
          "the world communicator in this test; it is in send(4 x float32 to "
          "rank 0, tag 0) at model_test.cc:61, for 5.0 s"));
}

TEST(CollectiveReportTest, AGroupCommunicatorIsNamedAndTheWorldIsNot) {
  std::vector<RankState> ranks;
  for (int r = 0; r < 4; ++r) {
    RankBuilder b(r);
    b.Comms({"world", "tensor group 0"}).Op(LedgerOp::kBarrier, 0, 1, 1.1, 10);
    if (r != 1) b.Op(LedgerOp::kAllReduce, 8, 80, -1, 30, {}, 1);
    ranks.push_back(b.Done());
  }
  const std::string text = CollectiveReport(ranks);
  EXPECT_THAT(text, HasSubstr("collective #0 on tensor group 0 never "
                              "completed:\n  ranks 0, 2-3 (3 ranks) are in"));
  EXPECT_THAT(text, Not(HasSubstr("world communicator")));
}

TEST(CollectiveReportTest, NothingIncompleteSaysWhereEachRankIs) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kBarrier, 0, 1, 1.1, 10).At("a.cc:5").Done(),
      RankBuilder(1).Op(LedgerOp::kBarrier, 0, 1, 1.1, 10).At("a.cc:5").Done(),
  };
  EXPECT_EQ(CollectiveReport(ranks),
            "no collective is incomplete on any communicator; where the ranks "
            "are:\n"
            "  ranks 0-1 (2 ranks) are past collective #0 barrier() at "
            "model_test.cc:10; they are now at a.cc:5 (stack below)");
}

TEST(CollectiveReportTest, TimesOfAGroupAreARange) {
  std::vector<RankState> ranks = {
      RankBuilder(0).Op(LedgerOp::kBarrier, 0, 70, -1, 10).Done(),
      RankBuilder(1).Op(LedgerOp::kBarrier, 0, 72, -1, 10).Done(),
      RankBuilder(2).Done(),
  };
  EXPECT_THAT(CollectiveReport(ranks),
              HasSubstr("ranks 0-1 (2 ranks) are in barrier() at "
                        "model_test.cc:10, for 28.0-30.0 s"));
}

TEST(CollectiveReportTest, ARankWhoseLedgerDidNotComeIsNamed) {
  RankState dead;
  dead.rank = 2;
  dead.ended = "failed";
  std::vector<RankState> ranks = {
      RankBuilder(0)
          .Op(LedgerOp::kBarrier, 0, 90, 90.1, 10, LedgerState::kFailed)
          .Done(),
      RankBuilder(1)
          .Op(LedgerOp::kBarrier, 0, 90, 90.1, 10, LedgerState::kFailed)
          .Done(),
      dead,
  };
  EXPECT_THAT(CollectiveReport(ranks),
              HasSubstr("  rank 2 is not known here: its ledger did not come; "
                        "it ended: failed"));
}

// A rank that did not use a communicator in this test (made in an earlier
// test, or a group it is no longer in) is not a difference.
TEST(CollectiveReportTest, ACommunicatorARankDidNotUseIsNoMismatch) {
  std::vector<RankState> ranks;
  for (int r = 0; r < 3; ++r) {
    RankBuilder b(r);
    b.Comms({"world", "data group 0"})
        .Op(LedgerOp::kBarrier, 0, 1, 1.1, 10, {}, r < 2 ? 1 : 0);
    RankState s = b.Done();
    s.ledger->digests = {{r < 2 ? 0u : 1u, r < 2 ? 0u : 7u},
                         {r < 2 ? 1u : 0u, r < 2 ? 9u : 0u}};
    ranks.push_back(std::move(s));
  }
  EXPECT_EQ(MismatchedCalls(ranks), "");
  // The same digests with a call that differs do not match.
  ranks[1].ledger->digests[1] = {1, 10};
  EXPECT_THAT(MismatchedCalls(ranks),
              HasSubstr("did not match across the ranks, though every call "
                        "returned"));
}

// Two pairs made alike on two stores of one scope ({0, 1} and {2, 3}, each
// "pair" of size 2): one key, held by two ranks as its rank 0. Their calls
// cannot be compared, which is said (not compared with the other pair's).
TEST(CollectiveReportTest, CommunicatorsMadeAlikeOnTwoStoresAreSaid) {
  std::vector<RankState> ranks;
  for (int r = 0; r < 4; ++r) {
    RankBuilder b(r);
    b.Comms({"world", "pair"}).Op(LedgerOp::kBarrier, 0, 1, 1.1, 10, {}, 1);
    RankState s = b.Done();
    s.ledger->comm_ranks = {r, r % 2};
    s.ledger->comm_sizes = {4, 2};
    s.ledger->digests = {{0, 0}, {1, 9}};
    ranks.push_back(std::move(s));
  }
  EXPECT_THAT(MismatchedCalls(ranks),
              HasSubstr("pair is rank 0 of ranks 0 and 2 at once: two "
                        "communicators made alike (the same "
                        "Store::scope(), prefix and size, on different stores) "
                        "cannot be told apart"));
  // One pair only: one communicator, compared as usual.
  ranks.resize(2);
  EXPECT_EQ(MismatchedCalls(ranks), "");
}

std::vector<RankLedgerView> Views(const std::vector<RankState>& ranks) {
  std::vector<RankLedgerView> views;
  for (const RankState& r : ranks) views.push_back(*r.ledger);
  return views;
}

// While ranks wait: a collective that ranks entered with different calls,
// one of them still in it, is found; calls alike, calls that all returned
// (the digests' business) and other communicators' numbers are not.
TEST(CollectiveReportTest, AnOpenCollectiveEnteredWithDifferentCalls) {
  const std::vector<RankState> differ = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 1, -1, 42).Done(),
      RankBuilder(1).Op(LedgerOp::kAllGather, 8, 1, -1, 43).Done()};
  EXPECT_EQ(OpenMismatch(Views(differ)),
            "collective #0 on the world communicator does not match across "
            "the ranks");
  const std::vector<RankState> count = {
      RankBuilder(0).Op(LedgerOp::kBarrier, 0, 1, 1.1, 10).Done(),
      RankBuilder(1)
          .Comms({"world", "tensor group 0"})
          .Op(LedgerOp::kBarrier, 0, 1, 1.1, 10)
          .Op(LedgerOp::kAllReduce, 8, 2, -1, 42, {}, 1)
          .Done(),
      RankBuilder(2)
          .Comms({"world", "tensor group 0"})
          .Op(LedgerOp::kBarrier, 0, 1, 1.1, 10)
          .Op(LedgerOp::kAllReduce, 16, 2, 3, 42, {}, 1)
          .Done()};
  EXPECT_EQ(OpenMismatch(Views(count)),
            "collective #0 on tensor group 0 does not match across the ranks");

  const std::vector<RankState> alike = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 1, -1, 42).Done(),
      RankBuilder(1).Op(LedgerOp::kAllReduce, 8, 1, 2, 43).Done()};
  EXPECT_EQ(OpenMismatch(Views(alike)), "");
  const std::vector<RankState> returned = {
      RankBuilder(0).Op(LedgerOp::kAllReduce, 8, 1, 2, 42).Done(),
      RankBuilder(1).Op(LedgerOp::kAllGather, 8, 1, 2, 43).Done()};
  EXPECT_EQ(OpenMismatch(Views(returned)), "");
  // Collective #0 of two communicators is no pair of calls.
  const std::vector<RankState> apart = {
      RankBuilder(0)
          .Comms({"pair 0"})
          .Op(LedgerOp::kAllReduce, 8, 1, -1, 42)
          .Done(),
      RankBuilder(1)
          .Comms({"pair 1"})
          .Op(LedgerOp::kAllGather, 8, 1, -1, 43)
          .Done()};
  EXPECT_EQ(OpenMismatch(Views(apart)), "");
}

TEST(CollectiveReportTest, NoLedgerOrNoOperationNoReport) {
  RankState s;
  EXPECT_EQ(CollectiveReport({s}), "");
  EXPECT_EQ(CollectiveReport({RankBuilder(0).Done(), RankBuilder(1).Done()}),
            "");
}

// --- Messages not received as they were sent (UnpairedMessages). ---

// A send or receive that returned, on the world of two ranks: `peer` is
// the other rank, `seq` its number in its pair and tag.
LedgerRecord Transfer(LedgerOp op, DataType type, std::uint64_t count, int peer,
                      int line, std::uint64_t seq = 0) {
  LedgerRecord r;
  r.op = op;
  r.type = type;
  r.count = count;
  r.peer = peer;
  r.seq = seq;
  r.file = "/src/model_test.cc";
  r.line = static_cast<std::uint32_t>(line);
  r.entered_ns = line * kSecond;
  r.ended_ns = r.entered_ns + 1;
  r.state = LedgerState::kCompleted;
  return r;
}

// Rank `rank` of 2 with `ops` on the world and the balance its ledger
// keeps of them.
RankState WithTransfers(int rank, std::vector<LedgerRecord> ops) {
  RankState s = RankBuilder(rank).Done();
  RankLedgerView& v = *s.ledger;
  v.comm_ranks = {rank};
  v.comm_sizes = {2};
  CommTransfers t;
  for (LedgerRecord& r : ops) {
    r.index = v.records.size();
    const bool send = r.op == LedgerOp::kSend;
    const Ledger::Call call{r.op,    r.type, ReduceOp::kSum,
                            r.count, r.peer, r.tag};
    const std::uint64_t h = send ? MessageHash(rank, r.peer, call, r.seq)
                                 : MessageHash(r.peer, rank, call, r.seq);
    t.balance += send ? h : 0 - h;
    ++t.count;
    v.records.push_back(r);
  }
  v.transfers = {t};
  return s;
}

// Rank 0 sends 8 floats at line 10; rank 1 receives 8 of `type` at 20.
std::vector<RankState> EightFloatsReceivedAs(DataType type) {
  return {WithTransfers(
              0, {Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 10)}),
          WithTransfers(1, {Transfer(LedgerOp::kRecv, type, 8, 0, 20)})};
}

TEST(UnpairedMessagesTest, MessagesReceivedAsSentPair) {
  EXPECT_EQ(UnpairedMessages(EightFloatsReceivedAs(DataType::kFloat32)), "");
}

// NCCL delivers 8 floats to a receive of 8 int32s (the same bytes).
TEST(UnpairedMessagesTest, AMessageReceivedAsAnotherTypeIsNamedWithBothCalls) {
  EXPECT_EQ(
      UnpairedMessages(EightFloatsReceivedAs(DataType::kInt32)),
      "the sends and receives on the world communicator did not pair, though "
      "every one returned:\n"
      "  the 1st message from rank 0 to rank 1 with tag 0 was sent as send(8 "
      "x float32 to rank 1, tag 0) at model_test.cc:10 and received as "
      "recv(8 x int32 from rank 0, tag 0) at model_test.cc:20: the data is "
      "not what the test meant");
}

// A small send completes with nobody to receive it; the first message that
// did not pair is named, not the later ones that did.
TEST(UnpairedMessagesTest, AMessageNobodyReceivedIsNamed) {
  const std::string text = UnpairedMessages(
      {WithTransfers(
           0, {Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 10, 0),
               Transfer(LedgerOp::kSend, DataType::kFloat32, 4, 1, 11, 1)}),
       WithTransfers(
           1, {Transfer(LedgerOp::kRecv, DataType::kFloat32, 4, 0, 20, 1)})});
  EXPECT_THAT(text, HasSubstr("the 1st message from rank 0 to rank 1 with "
                              "tag 0, sent as send(8 x float32 to rank 1, tag "
                              "0) at model_test.cc:10, was never received: "
                              "rank 1 made no receive for it"));
  EXPECT_THAT(text, Not(HasSubstr("2nd message")));
}

// Older than the ledgers keep: each rank's count, and that it is older.
TEST(UnpairedMessagesTest, ADifferenceOlderThanTheLedgersKeepSaysSo) {
  std::vector<RankState> ranks = {
      WithTransfers(0,
                    {Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 10)}),
      WithTransfers(1, {})};
  ranks[1].ledger->dropped = 64;  // Its receive may have been one of them.
  EXPECT_THAT(UnpairedMessages(ranks),
              HasSubstr("; the first message that did not pair is older than "
                        "the operations the ledgers keep:\n  rank 0 made 1 "
                        "send or receive\n  rank 1 made 0 sends and "
                        "receives"));
}

// A balance is whole only with every member's ledger, none of them a rank
// that ended as the test expected.
TEST(UnpairedMessagesTest, OnlyAWholeCommunicatorIsJudged) {
  RankState sender = WithTransfers(
      0, {Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 10)});
  EXPECT_EQ(UnpairedMessages({sender}), "");
  RankState ended = WithTransfers(1, {});
  ended.ended_as_expected = true;
  EXPECT_EQ(UnpairedMessages({sender, ended}), "");
  RankState unread;
  unread.rank = 1;
  EXPECT_EQ(UnpairedMessages({sender, unread}), "");
  // A receive that failed (a timeout the test expected) took its number in
  // its pair: the balance says nothing then.
  RankState timed_out = WithTransfers(1, {});
  timed_out.ledger->transfers[0].failed = 1;
  EXPECT_EQ(UnpairedMessages({sender, timed_out}), "");
}

// The 2nd message (#1) of a pair, received as another count.
TEST(UnpairedMessagesTest, AMessageIsNamedByItsPlaceInItsPair) {
  EXPECT_THAT(
      UnpairedMessages(
          {WithTransfers(
               0, {Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 10, 0),
                   Transfer(LedgerOp::kSend, DataType::kFloat32, 8, 1, 11, 1)}),
           WithTransfers(
               1,
               {Transfer(LedgerOp::kRecv, DataType::kFloat32, 8, 0, 20, 0),
                Transfer(LedgerOp::kRecv, DataType::kFloat32, 16, 0, 21, 1)})}),
      HasSubstr("the 2nd message from rank 0 to rank 1 with tag 0 was sent as "
                "send(8 x float32 to rank 1, tag 0) at model_test.cc:11 and "
                "received as recv(16 x float32 from rank 0, tag 0)"));
}

}  // namespace
}  // namespace disttest::internal
