// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The collective ledger: what a communicator's operations record, read back
// by another process while the rank is stuck in one, and after it was
// SIGKILLed there.
#include "comm/ledger.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/threads.h"
#include "disttest/error.h"

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;

// A backend that does nothing, or throws, or waits: the ledger is the base
// class's, whatever the backend.
class FakeCommunicator : public Communicator {
 public:
  static constexpr char kNoName[] = "\x01";  // SetName() is not called.
  // `rank`: its rank there, as the ledger records it when it is named.
  explicit FakeCommunicator(const std::string& name = "",
                            const std::string& prefix = "",
                            const std::string& scope = "", int rank = 0)
      : my_rank(rank) {
    if (name != kNoName) SetName(name, prefix, scope);
  }
  int rank() const override { return my_rank; }
  int my_rank = 0;
  int size() const override { return 2; }
  const char* backend_name() const override { return "fake"; }
  bool throw_next = false;
  std::string throw_text = "peer gone";
  std::function<void()> during;  // Runs inside the next operation.

 protected:
  void Step() {
    if (during) std::exchange(during, nullptr)();
    if (std::exchange(throw_next, false)) throw CommError(throw_text);
  }
  void DoBarrier() override { Step(); }
  void DoAllReduce(void*, std::size_t, DataType, ReduceOp) override { Step(); }
  void DoBroadcast(void*, std::size_t, DataType, int) override { Step(); }
  void DoAllGather(const void*, void*, std::size_t, DataType) override {
    Step();
  }
  void DoSend(const void*, std::size_t, DataType, int, std::uint32_t) override {
    Step();
  }
  void DoRecv(void*, std::size_t, DataType, int, std::uint32_t) override {
    Step();
  }
  // A request that is done when it is made.
  struct Done : RequestState {
    void Wait(std::chrono::milliseconds) override {}
  };
  std::unique_ptr<RequestState> DoISend(const void*, std::size_t, DataType, int,
                                        std::uint32_t) override {
    Step();
    return std::make_unique<Done>();
  }
  std::unique_ptr<RequestState> DoIRecv(void*, std::size_t, DataType, int,
                                        std::uint32_t) override {
    Step();
    return std::make_unique<Done>();
  }
};

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = LedgerMemory::Create(2);
    Ledger::Install(memory_, 1);
    Ledger::Current()->BeginTest();
    EnterPhase(RankPhase::kBody);  // The test's own operations.
  }
  std::shared_ptr<LedgerMemory> memory_;
};

TEST_F(LedgerTest, RecordsEachOperationWithItsCallerAndItsNumber) {
  FakeCommunicator world("world");
  std::vector<float> v(8);
  const int line = __LINE__ + 1;
  world.allreduce(v.data(), v.size(), ReduceOp::kMax);
  world.broadcast(v.data(), 4, /*root=*/1);
  world.send(v.data(), 2, /*peer=*/0, /*tag=*/7);
  world.barrier();

  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 4u);
  const LedgerRecord& first = view.records[0];
  EXPECT_EQ(first.str(), "allreduce(8 x float32, max)");
  EXPECT_EQ(first.where(), fmt::format("at ledger_test.cc:{}", line));
  EXPECT_EQ(first.seq, 0u);
  EXPECT_EQ(first.state, LedgerState::kCompleted);
  EXPECT_GT(first.ended_ns, 0);
  EXPECT_GE(first.ended_ns, first.entered_ns);
  EXPECT_EQ(view.records[1].str(), "broadcast(4 x float32, root 1)");
  EXPECT_EQ(view.records[1].seq, 1u);
  // Point-to-point operations are numbered apart from the collectives.
  EXPECT_EQ(view.records[2].str(), "send(2 x float32 to rank 0, tag 7)");
  EXPECT_EQ(view.records[2].seq, 0u);
  EXPECT_FALSE(view.records[2].collective());
  EXPECT_EQ(view.records[3].seq, 2u);
  EXPECT_EQ(view.comm_name(first.comm), "world");
}

// A collective whose backend timed out without naming anyone (Gloo's text)
// says for whom it waited, from the peers' ledgers, as the host arena does.
TEST_F(LedgerTest, AnAllGatherVShowsItsFirstCounts) {
  FakeCommunicator world("world");
  std::vector<float> in(8), out(64);
  const std::vector<std::size_t> few = {8, 8, 4, 4};
  const std::vector<std::size_t> many = {8, 8, 4, 4, 1, 1};
  // The fake has no allgatherv: each call fails, recorded all the same.
  EXPECT_THROW(world.allgatherv(in.data(), out.data(), few), CommError);
  EXPECT_THROW(world.allgatherv(in.data(), out.data(), many), CommError);
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 2u);
  EXPECT_EQ(view.records[0].str(),
            "allgatherv(24 x float32, counts {8, 8, 4, 4})");
  EXPECT_THAT(view.records[1].str(),
              HasSubstr("allgatherv(26 x float32, counts {8, 8, 4, 4, ...} "
                        "(6 ranks, #"));
}

TEST_F(LedgerTest, ATimeoutNamesThePeersThatDidNotArrive) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Ledger::Install(memory_, 0);
    Ledger::Current()->BeginTest();
    FakeCommunicator world("world");
    int x = 0;
    world.barrier();
    world.broadcast(&x, 1, 0);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  FakeCommunicator world("world");
  int x = 0;
  world.barrier();
  world.broadcast(&x, 1, 0);
  world.throw_next = true;
  world.throw_text = "Timed out waiting 50ms for recv operation to complete";
  try {
    world.allreduce(&x, 1, ReduceOp::kSum);
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(),
                 "Timed out waiting 50ms for recv operation to complete; by "
                 "the ranks' ledgers it was waiting for rank 0: rank 0's last "
                 "collective was #1 broadcast(1 x int32, root 0)");
  }
  // What names its ranks already, and what is no timeout, is left alone.
  for (const char* text :
       {"timed out after 50 ms waiting for rank 0 (same-host arena)",
        "peer gone"}) {
    world.throw_next = true;
    world.throw_text = text;
    try {
      world.allreduce(&x, 1, ReduceOp::kSum);
      ADD_FAILURE() << "no error";
    } catch (const CommError& e) {
      EXPECT_STREQ(e.what(), text);
    }
  }
  // Once the peer has entered the collective, nobody is missing.
  const RankLedgerView mine = memory_->Read(1);
  const std::uint64_t key = mine.comm_key(mine.records[0].comm);
  EXPECT_EQ(MissingFromCollective(*memory_, 1, key, 1, /*every_rank=*/true),
            "");
  EXPECT_EQ(MissingFromCollective(*memory_, 1, key, 2, /*every_rank=*/true),
            "waiting for rank 0: rank 0's last collective was #1 broadcast(1 "
            "x int32, root 0)");
}

// A rank not in a communicator's collective that waits in another's says
// where (trial 12: "rank 2 has entered no collective" of a rank in the
// world's barrier all along).
TEST_F(LedgerTest, ARankMissingFromACollectiveSaysWhereItIs) {
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);  // The parent's end: a parent that fails ends this read.
    Ledger::Install(memory_, 0);
    Ledger::Current()->BeginTest();
    EnterPhase(RankPhase::kBody);
    FakeCommunicator world("world");
    world.during = [&] {
      char c;
      (void)!read(go[0], &c, 1);  // Till the parent has looked.
    };
    world.barrier();  // The line below names it.
    _exit(0);
  }
  const int line = __LINE__ - 3;  // The child's barrier.
  close(go[0]);
  // However the test ends, the child's read returns and the child is reaped.
  struct EndChild {
    int write_end;
    pid_t pid;
    ~EndChild() {
      if (write_end >= 0) close(write_end);
      waitpid(pid, nullptr, 0);
    }
  } end_child{go[1], child};
  // Wait till the child is in its barrier (or has ended, which fails).
  while (memory_->Read(0).blocked == 0 &&
         waitpid(child, nullptr, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(memory_->Read(0).blocked, 0u) << "the child ended first";
  FakeCommunicator group("grads", "grads/", "test/");
  group.barrier();
  const RankLedgerView mine = memory_->Read(1);
  const std::uint64_t key = mine.comm_key(mine.records[0].comm);
  ASSERT_NE(key, 0u);
  EXPECT_EQ(MissingFromCollective(*memory_, 1, key, 0, /*every_rank=*/true),
            fmt::format("waiting for rank 0: rank 0 has entered no collective "
                        "of this communicator; rank 0 is in barrier() on "
                        "world at ledger_test.cc:{}",
                        line));
}

TEST_F(LedgerTest, EachCommunicatorHasItsOwnNumbersAndName) {
  FakeCommunicator world("world"), group;
  world.barrier();
  group.barrier();
  group.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 3u);
  EXPECT_NE(view.records[0].comm, view.records[1].comm);
  EXPECT_EQ(view.records[2].seq, 1u);
  EXPECT_EQ(view.comm_name(view.records[1].comm), "unnamed communicator");
}

// Communicators are told apart by the keys their rendezvous uses, their
// name, and how many of those the process made before: ranks that made one
// agree on all three.
TEST_F(LedgerTest, ACommunicatorIsKnownByItsKeysNameAndInstance) {
  FakeCommunicator mine("", "mine", "test/3/"), other("", "mine", "test/4/"),
      named("tensor", "mine", "test/3/");
  mine.barrier();
  mine.barrier();
  other.barrier();
  named.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 4u);
  EXPECT_EQ(view.records[0].comm, view.records[1].comm);
  EXPECT_NE(view.records[0].comm, view.records[2].comm);
  EXPECT_NE(view.records[0].comm, view.records[3].comm);
  EXPECT_EQ(view.comm_name(view.records[0].comm), "communicator \"mine\"");
  EXPECT_EQ(view.comm_name(view.records[3].comm), "tensor");
  EXPECT_NE(view.comm_key(view.records[0].comm),
            view.comm_key(view.records[2].comm));
  EXPECT_EQ(view.comms.size(), view.keys.size());
}

// A communicator made again is another: its numbers start at 0 (as on
// every rank, whatever the first one's ended at), and its calls are never
// taken for the first one's.
TEST_F(LedgerTest, ACommunicatorMadeAgainIsAnother) {
  {
    FakeCommunicator first("", "mine", "test/3/");
    first.barrier();
    first.barrier();
  }
  FakeCommunicator again("", "mine", "test/3/");
  again.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 3u);
  EXPECT_NE(view.records[2].comm, view.records[0].comm);
  EXPECT_EQ(view.records[2].seq, 0u);
  EXPECT_NE(view.comm_key(view.records[2].comm), 0u);
}

// Each test numbers a rank's communicators from past those still alive:
// one kept from an earlier test (a pooled or launched process's world) is
// never taken for one made alike in the next, while one that is gone
// leaves its number free, so that a process whose earlier tests made some
// its peers did not numbers the next test's as they do.
TEST_F(LedgerTest, ATestNumbersItsCommunicatorsPastThoseStillAlive) {
  auto kept = std::make_unique<FakeCommunicator>("", "", "");
  { FakeCommunicator gone("", "pair", "own/"); }
  Ledger::Current()->BeginTest();
  std::uint64_t pair_key = 0;
  {
    FakeCommunicator alike("", "", "");
    FakeCommunicator pair("", "pair", "own/");
    kept->barrier();
    alike.barrier();
    pair.barrier();
    const RankLedgerView view = memory_->Read(1);
    ASSERT_EQ(view.records.size(), 3u);
    EXPECT_NE(view.comm_key(view.records[0].comm),
              view.comm_key(view.records[1].comm));
    pair_key = view.comm_key(view.records[2].comm);
  }
  // The pair was numbered as by a process that never made the one that is
  // gone: as the first of its identity, which it is in the next test too.
  kept.reset();
  Ledger::Current()->BeginTest();
  FakeCommunicator first("", "pair", "own/");
  first.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 1u);
  EXPECT_EQ(view.comm_key(view.records[0].comm), pair_key);
}

// A communicator's collectives come from one thread at a time: a second
// thread that calls one while another is in one is refused, saying so (two
// callers would interleave each other's data, and their calls still match
// across the ranks); a collective its own thread makes inside one (a
// backend's, a helper's) is not.
TEST_F(LedgerTest, ASecondThreadInACollectiveIsRefused) {
  FakeCommunicator comm("grads", "", "");
  std::string refused;
  comm.during = [&] {
    std::thread other([&] {
      float x = 1;
      try {
        comm.allreduce(&x, 1, ReduceOp::kSum);
      } catch (const CommError& e) {
        refused = e.what();
      }
    });
    other.join();
  };
  comm.barrier();
  EXPECT_THAT(refused,
              HasSubstr("[rank 0/2] allreduce(1 x float32, sum) on grads: "
                        "another thread of this rank is in a collective of "
                        "this communicator"));
  // Nested in its own thread, and one after the other from two threads.
  comm.during = [&] { comm.barrier(); };
  EXPECT_NO_THROW(comm.barrier());
  std::thread([&] { EXPECT_NO_THROW(comm.barrier()); }).join();
}

// A pooled or launched rank makes new communicators test after test: the
// ids of those that are gone are used again from the next test on, so
// every one is compared, however many tests there were.
TEST_F(LedgerTest, IdsOfCommunicatorsThatAreGoneAreUsedAgain) {
  for (int test = 0; test < 3 * static_cast<int>(LedgerMemory::kComms);
       ++test) {
    Ledger::Current()->BeginTest();
    FakeCommunicator group("tensor group 0", "launch/tensor/0",
                           fmt::format("launched/{}/0/store/", test));
    group.barrier();
    const RankLedgerView view = memory_->Read(1);
    ASSERT_EQ(view.records.size(), 1u);
    ASSERT_LT(view.records[0].comm, LedgerMemory::kComms) << test;
    EXPECT_NE(view.comm_key(view.records[0].comm), 0u);
    EXPECT_EQ(view.comm_name(view.records[0].comm), "tensor group 0");
    EXPECT_EQ(view.records[0].seq, 0u);
  }
}

// A communicator whose backend never names it has no key: it is matched
// with no other, and its calls are not compared.
TEST_F(LedgerTest, ACommunicatorWithoutAKeyIsMatchedWithNoOther) {
  class Unnamed : public FakeCommunicator {
   public:
    Unnamed() : FakeCommunicator(kNoName) {}
  };
  Unnamed a, b;
  a.barrier();
  b.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 2u);
  EXPECT_NE(view.records[0].comm, view.records[1].comm);
  EXPECT_EQ(view.comm_key(view.records[0].comm), 0u);
  EXPECT_EQ(view.records[1].seq, 0u);
}

TEST_F(LedgerTest, AFailedOperationReadsFailed) {
  FakeCommunicator world("world");
  world.throw_next = true;
  EXPECT_THROW(world.barrier(), CommError);
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 1u);
  EXPECT_EQ(view.records[0].state, LedgerState::kFailed);
}

// Only calls that returned go into the digest: a call a test expects to
// throw is no difference between the ranks.
TEST_F(LedgerTest, TheDigestHoldsOnlyTheCallsThatReturned) {
  FakeCommunicator world("world");
  world.throw_next = true;
  EXPECT_THROW(world.barrier(), CommError);
  const std::uint64_t key = memory_->Read(1).comm_key(0);
  EXPECT_EQ(memory_->Read(1).digest_of(key).calls, 0u);
  world.barrier();
  const CommDigest one = memory_->Read(1).digest_of(key);
  EXPECT_EQ(one.calls, 1u);
  EXPECT_NE(one.digest, 0u);
}

TEST_F(LedgerTest, AnOperationInProgressReadsEnteredWithNoEnd) {
  FakeCommunicator world("world");
  RankLedgerView inside;
  world.during = [&] { inside = memory_->Read(1); };
  int in = 0, out[2] = {};
  world.allgather(&in, out, 1);
  ASSERT_EQ(inside.records.size(), 1u);
  EXPECT_EQ(inside.records[0].state, LedgerState::kEntered);
  EXPECT_EQ(inside.records[0].ended_ns, 0);
}

TEST_F(LedgerTest, KeepsTheLastEntriesOfTheTestAndCountsTheRest) {
  FakeCommunicator world("world");
  world.barrier();
  Ledger::Current()->BeginTest();  // What came before is another test's.
  for (int i = 0; i < 100; ++i) world.barrier();
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), LedgerMemory::kRing);
  EXPECT_EQ(view.dropped, 100 - LedgerMemory::kRing);
  EXPECT_EQ(view.records.back().seq, 100u);  // Numbers go on across tests.
}

TEST_F(LedgerTest, PhasesAreTimedAndWhatComesBeforeTheBodyIsTheHarnesss) {
  FakeCommunicator world("world");
  EnterPhase(RankPhase::kConnected);
  world.barrier();
  EnterPhase(RankPhase::kBody);
  world.barrier();
  const RankLedgerView view = memory_->Read(1);
  EXPECT_EQ(view.phase(), RankPhase::kBody);
  EXPECT_GT(view.phase_ns[static_cast<std::size_t>(RankPhase::kStarted)], 0);
  EXPECT_EQ(view.phase_ns[static_cast<std::size_t>(RankPhase::kSetUp)], 0);
  ASSERT_EQ(view.records.size(), 2u);
  EXPECT_TRUE(view.records[0].harness);
  EXPECT_EQ(view.records[0].where(), "(disttest's, before the body)");
  EXPECT_FALSE(view.records[1].harness);
}

// An isend or irecv, and the wait that completes it, read as the call
// the test made, in the ledger and in its text.
TEST_F(LedgerTest, AnIsendAndAnIrecvReadAsTheCallsTheTestMade) {
  FakeCommunicator world("world");
  std::vector<float> v(8);
  Request sent = world.isend(v.data(), 2, /*peer=*/1);
  Request received = world.irecv(v.data(), 4, /*peer=*/1, /*tag=*/3);
  received.wait();
  sent.wait();
  world.send(v.data(), 2, /*peer=*/1);
  const RankLedgerView view = memory_->Read(1);
  ASSERT_EQ(view.records.size(), 3u);
  EXPECT_EQ(view.records[0].str(), "isend(2 x float32 to rank 1, tag 0)");
  EXPECT_EQ(view.records[1].str(), "irecv(4 x float32 from rank 1, tag 3)");
  EXPECT_EQ(view.records[2].str(), "send(2 x float32 to rank 1, tag 0)");
  EXPECT_EQ(view.records[0].state, LedgerState::kCompleted);
  std::string error;
  std::optional<RankLedgerView> back = DecodeLedger(EncodeLedger(view), &error);
  ASSERT_TRUE(back) << error;
  ASSERT_EQ(back->records.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->records[i].str(), view.records[i].str());
  }
}

// A launched rank's ledger goes to rank 0 as text: the same records,
// times as ages at the moment it was read.
TEST_F(LedgerTest, AsTextItReadsBackWithItsAges) {
  FakeCommunicator world("world");
  std::vector<float> v(8);
  world.allreduce(v.data(), v.size(), ReduceOp::kSum);
  world.send(v.data(), 2, /*peer=*/1);
  world.during = [&] {
    const RankLedgerView view = memory_->Read(1, /*as_rank=*/5);
    const std::string text = EncodeLedger(view);
    std::string error;
    std::optional<RankLedgerView> back = DecodeLedger(text, &error);
    ASSERT_TRUE(back) << error << "\n" << text;
    EXPECT_EQ(back->rank, 5);
    EXPECT_EQ(back->read_ns, 0);
    EXPECT_EQ(back->comms, view.comms);
    EXPECT_EQ(back->keys, view.keys);
    EXPECT_EQ(back->comm_ranks, view.comm_ranks);
    EXPECT_EQ(back->comm_sizes, view.comm_sizes);
    ASSERT_EQ(back->transfers.size(), 1u);
    EXPECT_EQ(back->transfers[0].count, 1u);  // The first send.
    EXPECT_EQ(back->transfers[0].balance, view.transfers[0].balance);
    ASSERT_EQ(back->records.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      const LedgerRecord& a = view.records[i];
      const LedgerRecord& b = back->records[i];
      EXPECT_EQ(b.str(), a.str());
      EXPECT_EQ(b.where(), a.where());
      EXPECT_EQ(b.state, a.state);
      EXPECT_EQ(b.seq, a.seq);
      EXPECT_EQ(-b.entered_ns, view.read_ns - a.entered_ns);
    }
    EXPECT_EQ(back->records[2].ended_ns, 0);  // Still in it.
    EXPECT_EQ(back->phase(), RankPhase::kBody);
  };
  world.send(v.data(), 2, /*peer=*/3, /*tag=*/9);
}

// Each rank's sends and receives that returned, in a thread of its own (a
// rank thread: its ledger, its communicator) on a memory of two ranks.
// Whether their balances sum to 0 over the ranks, and rank 1's view.
struct Exchanged {
  bool agree = false;
  RankLedgerView receiver;
};
Exchanged Exchange(const std::function<void(FakeCommunicator&)>& rank0,
                   const std::function<void(FakeCommunicator&)>& rank1) {
  std::shared_ptr<LedgerMemory> memory = LedgerMemory::Create(2);
  for (int r : {0, 1}) {
    std::thread([&, r] {
      SetThreadsRank(r);
      Ledger::InstallForThread(memory, r);
      Ledger::Current()->BeginTest();
      FakeCommunicator comm("pairs", "", "", r);
      (r == 0 ? rank0 : rank1)(comm);
    }).join();
  }
  return {memory->DigestsAgree(), memory->Read(1)};
}

// A message's send and receive pair by their sender, receiver, tag and
// number in that pair and tag, element type and count: messages received
// as they were sent balance, whatever the order of their tags; one received
// as another type, or never received, does not.
TEST(LedgerTransfersTest, MessagesReceivedAsSentBalanceAndOthersDoNot) {
  std::vector<float> f(8);
  std::vector<std::int32_t> i(8);
  auto send_two_tags = [&](FakeCommunicator& c) {
    c.send(f.data(), 8, 1, /*tag=*/3);
    c.send(i.data(), 4, 1, /*tag=*/5);
    c.send(f.data(), 2, 1, /*tag=*/3);
  };
  Exchanged e = Exchange(send_two_tags, [&](FakeCommunicator& c) {
    c.recv(i.data(), 4, 0, 5);
    c.recv(f.data(), 8, 0, 3);
    c.recv(f.data(), 2, 0, 3);
  });
  EXPECT_TRUE(e.agree);
  ASSERT_EQ(e.receiver.transfers.size(), 1u);
  EXPECT_EQ(e.receiver.transfers[0].count, 3u);
  // Tag 3's messages in another order: its first is 8 floats, not 2.
  EXPECT_FALSE(Exchange(send_two_tags, [&](FakeCommunicator& c) {
                 c.recv(f.data(), 2, 0, 3);
                 c.recv(f.data(), 8, 0, 3);
                 c.recv(i.data(), 4, 0, 5);
               }).agree);
  // 8 floats received as 8 int32s (the same bytes).
  EXPECT_FALSE(Exchange([&](FakeCommunicator& c) { c.send(f.data(), 8, 1); },
                        [&](FakeCommunicator& c) { c.recv(i.data(), 8, 0); })
                   .agree);
  // A message nobody received; and one received that nobody sent.
  EXPECT_FALSE(Exchange([&](FakeCommunicator& c) { c.send(f.data(), 8, 1); },
                        [](FakeCommunicator&) {})
                   .agree);
  EXPECT_FALSE(Exchange([](FakeCommunicator&) {},
                        [&](FakeCommunicator& c) { c.recv(f.data(), 8, 0); })
                   .agree);
  // A receive that failed (a timeout the test expected) took its number in
  // its pair, so the message received after it is numbered one on: the
  // balance says nothing then, and is not judged.
  Exchanged failed =
      Exchange([&](FakeCommunicator& c) { c.send(f.data(), 8, 1); },
               [&](FakeCommunicator& c) {
                 c.throw_next = true;
                 EXPECT_THROW(c.recv(f.data(), 8, 0), CommError);
                 c.recv(f.data(), 8, 0);
               });
  EXPECT_TRUE(failed.agree);
  EXPECT_EQ(failed.receiver.transfers[0].count, 1u);
  EXPECT_EQ(failed.receiver.transfers[0].failed, 1u);
}

TEST(LedgerTextTest, AnythingElseIsRefusedSayingWhy) {
  std::string error;
  EXPECT_FALSE(DecodeLedger("", &error));
  EXPECT_EQ(error, "it is empty");
  EXPECT_FALSE(DecodeLedger("hello", &error));
  EXPECT_THAT(error, HasSubstr("does not start with"));
  EXPECT_FALSE(DecodeLedger("ledger 3 0 0\nop 1 2 3", &error));
  EXPECT_EQ(error, "a short operation");
  // The operation after the last does not exist.
  EXPECT_FALSE(DecodeLedger(
      fmt::format("ledger 3 0 0\nop 0 0 0 {} 0 0 1 -1 0 8 0 5 - 3 a.cc",
                  static_cast<int>(kLastLedgerOp) + 1),
      &error));
  EXPECT_EQ(error, "a bad operation");
  EXPECT_FALSE(DecodeLedger("ledger 3 0 0\nfoo", &error));
  EXPECT_THAT(error, HasSubstr("an unknown line"));
  EXPECT_TRUE(DecodeLedger("ledger 3 0 0\nop 0 0 0 1 4 0 1 -1 0 8 0 5 - 3 a.cc",
                           &error))
      << error;
}

// The point of the ledger: a rank stuck in a collective, then SIGKILLed
// there, is still read by the parent, which mapped the memory first.
TEST(LedgerAcrossProcessesTest, AStuckThenKilledRankIsReadByItsParent) {
  auto memory = LedgerMemory::Create(1);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    Ledger::Install(memory, 0);
    Ledger::Current()->BeginTest();
    FakeCommunicator world("world");
    world.during = [&] {
      (void)!write(ready[1], "x", 1);
      for (;;) pause();
    };
    int x = 0;
    world.broadcast(&x, 1, 0);
    _exit(0);
  }
  close(ready[1]);
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  RankLedgerView stuck = memory->Read(0);
  ASSERT_EQ(stuck.records.size(), 1u);
  EXPECT_EQ(stuck.records[0].state, LedgerState::kEntered);
  EXPECT_EQ(stuck.records[0].str(), "broadcast(1 x int32, root 0)");
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  RankLedgerView after = memory->Read(0);
  ASSERT_EQ(after.records.size(), 1u);
  EXPECT_EQ(after.records[0].state, LedgerState::kEntered);
  EXPECT_EQ(after.comm_name(after.records[0].comm), "world");
}

TEST(LedgerMemoryTest, ADescriptorOfTheWrongSizeIsNamed) {
  auto memory = LedgerMemory::Create(2);
  const int fd = dup(memory->fd());
  try {
    LedgerMemory::Attach(fd, 3);
    FAIL() << "attached a ledger for 2 ranks as one for 3";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format(
                              "descriptor {} is not a collective ledger for 3 "
                              "ranks",
                              fd)));
  }
  EXPECT_THROW(LedgerMemory::Create(0), Error);
}

TEST(LedgerMemoryTest, ARingOfAnyLengthAttachesAsItWasMade) {
  auto memory = LedgerMemory::Create(3, 1000);
  auto attached = LedgerMemory::Attach(dup(memory->fd()), 3);
  EXPECT_EQ(attached->ring(), 1000u);
  EXPECT_THROW(LedgerMemory::Create(1, 0), Error);
  EXPECT_THROW(LedgerMemory::Create(1, LedgerMemory::kMaxRing + 1), Error);
}

}  // namespace
}  // namespace disttest::internal

namespace disttest::internal {
namespace {

// A name too long for the ledger is cut at the end of a word, with " ...",
// never in the middle of one ("... split 0 (color  did not match").
TEST(LedgerNameTest, LongNamesAreCutAtAWordNotInIt) {
  const std::string nested =
      "world split 0 (color 1) split 0 (color 1) split 3 (color 0)";
  EXPECT_EQ(ShortName(nested, 40), "world split 0 (color 1) split 0 ...");
  EXPECT_EQ(ShortName(nested, nested.size()), nested);
  EXPECT_EQ(ShortName("short", 40), "short");
  // One long word: cut where it must be.
  EXPECT_EQ(ShortName(std::string(50, 'x'), 40), std::string(36, 'x') + " ...");
  // A nested split's name fits whole now.
  EXPECT_LE(nested.size(), LedgerMemory::kNameBytes - 1);
}

}  // namespace
}  // namespace disttest::internal
