// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// HostArena on its own and behind a Gloo communicator: ranks as threads of
// this process, which share the arena's memory as forked ranks share its
// mapping.
#include "comm/host_arena.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/peer_errors.h"
#include "comm/thread_ranks.h"
#include "disttest/error.h"

namespace disttest {
namespace {

using ::testing::HasSubstr;
using testing::RunRanks;

// A rank said to have ended (the harness does so when it sees the process
// go) ends its peers' waits at once, with a message naming it.
TEST(HostArenaTest, EndedRankFailsItsPeersWaitNamingIt) {
  auto arena = HostArena::Create(3);
  std::atomic<int> waiting{0};
  std::thread marker([&] {
    while (waiting < 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    arena->MarkEnded(2);
  });
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ++waiting;
      try {
        arena->Barrier(r, std::chrono::seconds(30));
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  marker.join();
  for (const std::string& e : errors) {
    EXPECT_EQ(e, "rank 2 ended while its peers waited for it in a collective");
  }
}

// Through a communicator: the first rank to time out names the rank that
// never came; a peer still waiting then learns that the arena broke. Each
// message names the rank and the operation, and the communicator counts as
// failed (a pooled rank leaves).
TEST(HostArenaTest, TimeoutNamesTheRanksThatDidNotArrive) {
  auto arena = HostArena::Create(3);
  std::vector<std::string> errors(2);
  RunRanks(
      3,
      [&errors](Communicator& comm) {
        if (comm.rank() == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(600));
          return;  // Never joins the allreduce.
        }
        std::int32_t x = 1;
        try {
          comm.allreduce(&x, 1, ReduceOp::kSum);
          ADD_FAILURE() << "an allreduce without rank 2 returned";
        } catch (const CommError& e) {
          errors[comm.rank()] = e.what();
        }
        EXPECT_TRUE(comm.failed());
      },
      std::chrono::milliseconds(300), arena);
  const std::string timeout =
      "timed out after 300 ms waiting for rank 2 (same-host arena)";
  int timed_out = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(errors[r],
                HasSubstr(fmt::format(
                    "[rank {}/3] allreduce of 1 int32 (sum) failed: ", r)));
    if (errors[r].find(timeout) != std::string::npos) {
      ++timed_out;
    } else {
      EXPECT_THAT(errors[r], HasSubstr("gave up waiting in the host "
                                       "arena (see its error)"));
    }
  }
  EXPECT_GE(timed_out, 1) << errors[0] << "\n" << errors[1];
}

// A rank that gave up a wait stays counted in that barrier: after it, no
// collective may pair the ranks up (it would be one step off); every one
// fails, naming the rank that gave up.
TEST(HostArenaTest, AfterAFailedWaitEveryCollectiveFails) {
  auto arena = HostArena::Create(2);
  try {
    arena->Barrier(0, std::chrono::milliseconds(50));
    ADD_FAILURE() << "a barrier without rank 1 returned";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("timed out after 50 ms waiting for rank 1"));
  }
  const std::string broken =
      "rank 0 gave up waiting in the host arena (see its error); the "
      "arena cannot be used after that";
  for (int rank : {0, 1}) {
    std::int32_t x = 1;
    try {
      arena->AllReduce(rank, &x, 1, DataType::kInt32, ReduceOp::kSum,
                       std::chrono::seconds(30));
      ADD_FAILURE() << "rank " << rank << " completed a collective alone";
    } catch (const CommError& e) {
      EXPECT_EQ(e.what(), broken);
    }
  }
}

// The errors a peer caused are noted as such (comm/peer_errors.h), so that
// the rank marks a failure that quotes one, whatever words surround it; a
// rank's own timeout is not, and a new test forgets the last one's.
TEST(HostArenaTest, ErrorsAPeerCausedAreNotedAsSuchAndOwnOnesAreNot) {
  internal::ForgetErrorsOfPeers();
  auto arena = HostArena::Create(2);
  std::string own;
  try {
    arena->Barrier(0, std::chrono::milliseconds(50));
  } catch (const CommError& e) {
    own = e.what();
  }
  ASSERT_THAT(own, HasSubstr("timed out"));
  EXPECT_FALSE(internal::ReportsAnErrorOfAPeer("x.cc:3: threw " + own));
  std::string peers;
  try {
    arena->Barrier(1, std::chrono::seconds(30));
  } catch (const CommError& e) {
    peers = e.what();
  }
  ASSERT_THAT(peers, HasSubstr("gave up waiting"));
  EXPECT_TRUE(internal::ReportsAnErrorOfAPeer(
      "the test body threw disttest::CommError: [rank 1/2] barrier failed: " +
      peers));
  internal::ForgetErrorsOfPeers();
  EXPECT_FALSE(internal::ReportsAnErrorOfAPeer(peers));
}

// A mismatch fails the rank's test even where the test caught it, unless a
// failure quotes it. One no call of the rank threw (a launched rank's side
// thread noted it after the rank's call had failed, cut by a peer that
// found it first) is said by any failure: the test did not catch it.
TEST(HostArenaTest, AMismatchNoCallThrewIsSaidByAnyFailure) {
  const std::string found =
      "collective #0 on communicator \"x\" does not match";
  const std::string thrown =
      "collective #1 on communicator \"x\" does not match";
  for (bool test_failed : {false, true}) {
    internal::ForgetErrorsOfPeers();
    (void)internal::MismatchOfCalls(found);
    (void)internal::MismatchOfCalls(thrown);
    internal::PlaceMismatch("[rank 1/2] allgather failed: " + thrown, "",
                            "t.cc", 7);
    internal::NoteSaid("the test body threw: Connection closed by peer");
    const std::vector<internal::MismatchThrown> caught =
        internal::MismatchesNotSaid(test_failed);
    ASSERT_EQ(caught.size(), test_failed ? 1u : 2u) << test_failed;
    const internal::MismatchThrown& at_call = caught.back();
    EXPECT_EQ(at_call.file, "t.cc");
    EXPECT_EQ(at_call.line, 7u);
    EXPECT_THAT(at_call.error, HasSubstr(thrown));
    if (!test_failed) {
      EXPECT_EQ(caught.front().error, found);
    }
    EXPECT_TRUE(internal::MismatchesNotSaid(test_failed).empty());
  }
  internal::ForgetErrorsOfPeers();
}

// A re-executed rank maps the arena from the descriptor it inherited: the
// same memory as the parent's.
TEST(HostArenaTest, AttachedArenaIsTheSameMemory) {
  auto created = HostArena::Create(2);
  ASSERT_GE(created->fd(), 0) << "memfd_create is not allowed here";
  auto attached = HostArena::Attach(dup(created->fd()), 2);
  EXPECT_EQ(attached->fd(), -1);
  std::vector<double> zero(3, 1.5), one(3, 2.0);
  std::thread peer([&] {
    attached->AllReduce(1, one.data(), one.size(), DataType::kFloat64,
                        ReduceOp::kSum, std::chrono::seconds(30));
  });
  created->AllReduce(0, zero.data(), zero.size(), DataType::kFloat64,
                     ReduceOp::kSum, std::chrono::seconds(30));
  peer.join();
  EXPECT_EQ(zero, std::vector<double>(3, 3.5));
  EXPECT_EQ(one, std::vector<double>(3, 3.5));

  try {
    HostArena::Attach(dup(created->fd()), 3);
    ADD_FAILURE() << "a 2-rank arena was attached for 3 ranks";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a host arena for 3 ranks"));
  }
  EXPECT_THROW(HostArena::Attach(-1, 2), Error);
}

// Runs body(rank) on `world` threads over `arena`; returns each rank's
// error ("" if none).
std::vector<std::string> OnRanks(HostArena& arena,
                                 const std::function<void(int)>& body) {
  std::vector<std::string> errors(arena.world());
  std::vector<std::thread> ranks;
  for (int r = 0; r < arena.world(); ++r) {
    ranks.emplace_back([&, r] {
      try {
        body(r);
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  return errors;
}

// A receiver whose message (the first from its peer with its tag) has
// another count or type refuses it: both sides fail at once, naming both
// (Gloo would leave both waiting).
TEST(HostArenaTest, SendAndRecvThatDisagreeBothFailAtOnce) {
  struct Case {
    std::size_t count;
    DataType type;
    const char* expected;
  };
  for (const Case& c : {Case{16, DataType::kFloat32, "16 x float32 with tag 1"},
                        Case{8, DataType::kInt32, "8 x int32 with tag 1"}}) {
    auto arena = HostArena::Create(2);
    std::vector<float> buffer(16);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> errors = OnRanks(*arena, [&](int r) {
      if (r == 0) {
        arena->Send(0, buffer.data(), 8, DataType::kFloat32, 1, 1,
                    std::chrono::seconds(30));
      } else {
        arena->Recv(1, buffer.data(), c.count, c.type, 0, 1,
                    std::chrono::seconds(30));
      }
    });
    const std::string message = fmt::format(
        "rank 0 sent 8 x float32 with tag 1; rank 1 expected {}", c.expected);
    EXPECT_EQ(errors[0], message);
    EXPECT_EQ(errors[1], message);
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(10));
  }
}

// Messages pair by tag, as on Gloo: a receive of another tag waits for its
// own, and its timeout names what the peer did send.
TEST(HostArenaTest, RecvOfAnotherTagWaitsAndItsTimeoutNamesWhatCame) {
  auto arena = HostArena::Create(2);
  std::vector<float> buffer(8);
  std::vector<std::string> errors = OnRanks(*arena, [&](int r) {
    if (r == 0) {
      arena->Send(0, buffer.data(), 8, DataType::kFloat32, 1, 1,
                  std::chrono::seconds(30));
    } else {
      arena->Recv(1, buffer.data(), 8, DataType::kFloat32, 0, 2,
                  std::chrono::milliseconds(200));
    }
  });
  EXPECT_EQ(errors[1],
            "timed out after 200 ms waiting for rank 0 to send it (same-host "
            "arena); rank 0 has sent this rank 8 x float32 with tag 1, which "
            "no receive took");
  // The sender is told when its receiver gives up.
  EXPECT_THAT(errors[0], HasSubstr("rank 1"));
}

// Non-blocking sends and receives: several in flight at once, received in
// another order than sent (by tag), larger than the heap (their pieces
// posted as room comes), both ranks sending to each other before either
// waits, and messages of one tag that keep their order.
TEST(HostArenaTest, PostedSendsAndReceivesPairByTagInAnyOrder) {
  auto arena = HostArena::Create(2);
  const std::size_t big = 3 * HostArena::kHeapBytes / sizeof(std::int32_t) + 7;
  std::vector<std::string> errors = OnRanks(*arena, [&](int r) {
    const int peer = 1 - r;
    std::vector<std::vector<std::int32_t>> out(4), in(4);
    const std::size_t sizes[4] = {0, 1, 1000, big};
    for (int t = 0; t < 4; ++t) {
      out[t].resize(sizes[t]);
      in[t].assign(sizes[t], -1);
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        out[t][i] = static_cast<std::int32_t>(r * 1000000 + t * 100000 + i);
      }
    }
    std::vector<std::uint64_t> ids;
    // Sends in tag order 0..3, receives in reverse.
    for (int t = 0; t < 4; ++t) {
      ids.push_back(arena->PostSend(r, out[t].data(), sizes[t],
                                    DataType::kInt32, peer, t));
    }
    for (int t = 3; t >= 0; --t) {
      ids.push_back(arena->PostRecv(r, in[t].data(), sizes[t], DataType::kInt32,
                                    peer, t));
    }
    // Waited for in yet another order.
    for (std::size_t k = ids.size(); k-- > 0;) {
      arena->WaitFor(r, ids[k], std::chrono::seconds(30));
    }
    for (int t = 0; t < 4; ++t) {
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(in[t][i],
                  static_cast<std::int32_t>(peer * 1000000 + t * 100000 + i))
            << "tag " << t << ", element " << i;
      }
    }
    // Three messages of one tag arrive in the order sent.
    std::int32_t first = 0, second = 0, third = 0;
    if (r == 0) {
      for (std::int32_t v : {1, 2, 3}) {
        arena->Send(0, &v, 1, DataType::kInt32, 1, 9, std::chrono::seconds(30));
      }
    } else {
      const std::uint64_t a =
          arena->PostRecv(1, &first, 1, DataType::kInt32, 0, 9);
      const std::uint64_t b =
          arena->PostRecv(1, &second, 1, DataType::kInt32, 0, 9);
      arena->Recv(1, &third, 1, DataType::kInt32, 0, 9,
                  std::chrono::seconds(30));
      arena->WaitFor(1, b, std::chrono::seconds(30));
      arena->WaitFor(1, a, std::chrono::seconds(30));
      EXPECT_EQ(first, 1);
      EXPECT_EQ(second, 2);
      EXPECT_EQ(third, 3);
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// A rank whose first send waits for a receiver that comes only later can
// still send to another rank meanwhile (no head-of-line blocking between
// peers), as MPI's eager sends allow.
TEST(HostArenaTest, ASendToOnePeerDoesNotHoldBackOneToAnother) {
  auto arena = HostArena::Create(3);
  std::vector<std::string> errors = OnRanks(*arena, [&](int r) {
    std::int32_t v = 7, got = 0;
    if (r == 0) {
      const std::uint64_t to1 =
          arena->PostSend(0, &v, 1, DataType::kInt32, 1, 0);
      arena->Send(0, &v, 1, DataType::kInt32, 2, 0, std::chrono::seconds(30));
      arena->WaitFor(0, to1, std::chrono::seconds(30));
    } else if (r == 2) {
      arena->Recv(2, &got, 1, DataType::kInt32, 0, 0, std::chrono::seconds(30));
      arena->Send(2, &got, 1, DataType::kInt32, 1, 5, std::chrono::seconds(30));
    } else {
      // Rank 1 takes rank 0's message only after rank 2's, which rank 2
      // sends only after rank 0's second send reached it.
      arena->Recv(1, &got, 1, DataType::kInt32, 2, 5, std::chrono::seconds(30));
      arena->Recv(1, &got, 1, DataType::kInt32, 0, 0, std::chrono::seconds(30));
      EXPECT_EQ(got, 7);
    }
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// A send or receive waits for its peer only: an unrelated rank that ends
// (a rank whose body is done) does not fail it, the peer's end does.
TEST(HostArenaTest, SendAndRecvFailWhenTheirPeerEndsOnly) {
  auto arena = HostArena::Create(3);
  std::atomic<int> stage{0};
  std::int64_t value = 0;
  std::vector<std::string> errors = OnRanks(*arena, [&](int r) {
    if (r == 0) {
      // Rank 2 ends while rank 1 waits for this rank's message.
      while (stage < 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::int64_t x = 42;
      arena->Send(0, &x, 1, DataType::kInt64, 1, 0, std::chrono::seconds(30));
    } else if (r == 1) {
      std::thread marker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        arena->MarkEnded(2);
        stage = 1;
      });
      arena->Recv(1, &value, 1, DataType::kInt64, 0, 0,
                  std::chrono::seconds(30));
      marker.join();
      // Now a receive from the rank that ended.
      std::thread ender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        arena->MarkEnded(0);
      });
      try {
        arena->Recv(1, &value, 1, DataType::kInt64, 0, 1,
                    std::chrono::seconds(30));
      } catch (...) {
        ender.join();
        throw;
      }
      ender.join();
    }
  });
  EXPECT_EQ(value, 42);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "rank 0 ended while this rank waited for it to send it");
}

TEST(HostArenaTest, SendWithoutAReceiverTimesOutNamingIt) {
  auto arena = HostArena::Create(2);
  std::int32_t x = 0;
  try {
    arena->Send(0, &x, 1, DataType::kInt32, 1, 3,
                std::chrono::milliseconds(50));
    ADD_FAILURE() << "a send without a receiver returned";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(),
                 "timed out after 50 ms waiting for rank 1 to receive it "
                 "(same-host arena)");
  }
  // What was offered half-way cannot be trusted: the arena is given up.
  EXPECT_THROW(
      arena->Recv(1, &x, 1, DataType::kInt32, 0, 3, std::chrono::seconds(1)),
      CommError);
}

// Pooled ranks get their tests through the arena: the parent hands out test
// n only once every rank has parked for it, every rank gets each name once,
// a name too long for the arena says "in the store", and an empty one says
// leave.
TEST(HostArenaTest, PooledRanksGetEachTestOnceAllHaveParked) {
  auto arena = HostArena::Create(3);
  EXPECT_FALSE(arena->AllParked(1));
  const std::vector<std::string> tests = {
      "Suite.First/3ranks", std::string(HostArena::kTestNameBytes + 1, 'x'),
      "Suite.Third/3ranks", ""};
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      for (unsigned n = 1;; ++n) {
        arena->Park(r, n);
        std::optional<std::string> name = arena->AwaitTest(n);
        got[r].push_back(name ? *name : "<in the store>");
        if (name && name->empty()) return;
      }
    });
  }
  for (unsigned n = 1; n <= tests.size(); ++n) {
    while (!arena->AllParked(n)) std::this_thread::yield();
    arena->Dispatch(n, tests[n - 1]);
  }
  for (auto& t : ranks) t.join();
  const std::vector<std::string> expected = {
      "Suite.First/3ranks", "<in the store>", "Suite.Third/3ranks", ""};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], expected) << "rank " << r;
}

TEST(HostArenaTest, WorldSizeOutOfRangeIsAClearError) {
  try {
    HostArena::Create(HostArena::kMaxRanks + 1);
    ADD_FAILURE() << "an arena for too many ranks was made";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a host arena takes 1 to 1024 ranks, not 1025");
  }
}

TEST(HostArenaTest, ArenaForAnotherWorldSizeIsAClearError) {
  testing::ServerThread store;
  TcpStore client("127.0.0.1", store.port(), std::chrono::seconds(5));
  GlooOptions options;
  options.arena = HostArena::Create(3);
  try {
    GlooCommunicator::Create(client, 0, 2, options);
    ADD_FAILURE() << "a 3-rank arena was accepted for 2 ranks";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "[rank 0/2] the host arena is for 3 ranks, not 2");
  }
  EXPECT_THROW(HostArena::Create(0), Error);
}

}  // namespace
}  // namespace disttest
