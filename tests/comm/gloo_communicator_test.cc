// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator on its own: W ranks as W threads of this process, each
// with its own device and context, meeting through a TcpStoreServer on
// loopback. No harness, no fork.
#include "disttest/comm/gloo_communicator.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "comm/host_arena.h"
#include "comm/thread_ranks.h"
#include "disttest/comm/create.h"
#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "disttest/rendezvous/tcp_store_server.h"
#include "rendezvous/server_thread.h"

namespace disttest {
namespace {

using testing::RunRanks;

using ::testing::HasSubstr;

template <typename T>
void CheckReductions(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  std::vector<T> v(5, static_cast<T>(r + 1));
  comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
  for (T x : v) EXPECT_EQ(x, static_cast<T>(n * (n + 1) / 2));
  T prod = static_cast<T>(r + 1);
  comm.allreduce(&prod, 1, ReduceOp::kProd);
  T expected = 1;
  for (int i = 1; i <= n; ++i) expected = static_cast<T>(expected * i);
  EXPECT_EQ(prod, expected);
  T lo = static_cast<T>(10 - r), hi = static_cast<T>(10 - r);
  comm.allreduce(&lo, 1, ReduceOp::kMin);
  comm.allreduce(&hi, 1, ReduceOp::kMax);
  EXPECT_EQ(lo, static_cast<T>(10 - (n - 1)));
  EXPECT_EQ(hi, static_cast<T>(10));
}

// World size, and whether the ranks share a HostArena.
class GlooCommunicatorTest
    : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int World() const { return std::get<0>(GetParam()); }
  void Run(const std::function<void(Communicator&)>& body) {
    RunRanks(World(), body, std::chrono::seconds(30),
             std::get<1>(GetParam()) ? HostArena::Create(World()) : nullptr);
  }
};

TEST_P(GlooCommunicatorTest, AllReduceEveryOpAndType) {
  Run([](Communicator& comm) {
    CheckReductions<float>(comm);
    CheckReductions<double>(comm);
    CheckReductions<std::int32_t>(comm);
    CheckReductions<std::int64_t>(comm);
  });
}

// Small buffers take Gloo's bcube algorithm, large ones its ring; bcube
// factors the world size (6 = 2 x 3, 5 not at all), and counts smaller than
// the world leave some ranks' chunks empty.
TEST_P(GlooCommunicatorTest, AllReduceSmallAndLargeBuffers) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count :
         {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{65536},
          std::size_t{65537}, std::size_t{100003}}) {
      std::vector<std::int32_t> v(count);
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = static_cast<std::int32_t>(i % 1000) * (r + 1);
      }
      comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(v[i], static_cast<std::int32_t>(i % 1000) * n * (n + 1) / 2)
            << "count " << count << ", element " << i;
      }
    }
  });
}

TEST_P(GlooCommunicatorTest, BroadcastFromEveryRoot) {
  Run([](Communicator& comm) {
    for (int root = 0; root < comm.size(); ++root) {
      std::vector<double> v(3, comm.rank() == root ? root + 0.25 : -1.0);
      comm.broadcast(v.data(), v.size(), root);
      EXPECT_EQ(v, std::vector<double>(3, root + 0.25));
    }
  });
}

TEST_P(GlooCommunicatorTest, AllGatherPlacesEachRankAtItsOffset) {
  Run([](Communicator& comm) {
    std::int32_t mine[2] = {comm.rank(), -comm.rank()};
    std::vector<std::int32_t> all(2 * comm.size());
    comm.allgather(mine, all.data(), 2);
    for (int r = 0; r < comm.size(); ++r) {
      EXPECT_EQ(all[2 * r], r);
      EXPECT_EQ(all[2 * r + 1], -r);
    }
  });
}

TEST_P(GlooCommunicatorTest, SendRecvMatchesByPeerAndTag) {
  if (World() < 2) GTEST_SKIP() << "needs two ranks";
  Run([](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 0) {
      std::int64_t a = 11, b = 22;
      comm.send(&a, 1, 1, /*tag=*/1);
      comm.send(&b, 1, 1, /*tag=*/2);
    } else if (comm.rank() == 1) {
      std::int64_t a = 0, b = 0;
      comm.recv(&a, 1, 0, /*tag=*/1);
      comm.recv(&b, 1, 0, /*tag=*/2);
      EXPECT_EQ(a, 11);
      EXPECT_EQ(b, 22);
    }
    comm.barrier();
  });
}

// Larger than one slot of the arena (64 KiB), and not a multiple of it: the
// arena takes them in rounds, and an allreduce that large is split into
// shares that each rank reduces for all.
TEST_P(GlooCommunicatorTest, BuffersLargerThanASlotArriveWhole) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    const std::size_t count = 3 * 16384 + 5;  // int32: 3 slots and a bit.
    std::vector<std::int32_t> v(count);
    for (std::size_t i = 0; i < count; ++i) {
      v[i] = static_cast<std::int32_t>(i) * (r == n - 1 ? 1 : 0);
    }
    comm.broadcast(v.data(), v.size(), n - 1);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(v[i], static_cast<std::int32_t>(i)) << "broadcast, " << i;
    }
    std::vector<std::int32_t> mine(count, r), all(count * n, -1);
    comm.allgather(mine.data(), all.data(), count);
    for (std::size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], static_cast<std::int32_t>(i / count))
          << "allgather, " << i;
    }
    if (n < 2) return;
    std::vector<std::int32_t> message(count);
    if (r == 0) {
      for (std::size_t i = 0; i < count; ++i) {
        message[i] = static_cast<std::int32_t>(count - i);
      }
      comm.send(message.data(), count, 1, /*tag=*/7);
      comm.recv(message.data(), 0, 1, /*tag=*/8);  // An empty reply.
    } else if (r == 1) {
      comm.recv(message.data(), count, 0, /*tag=*/7);
      comm.send(message.data(), 0, 0, /*tag=*/8);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(message[i], static_cast<std::int32_t>(count - i)) << i;
      }
    }
  });
}

// Floating-point sums depend on their order: every rank must still get the
// same bits, for a small buffer (reduced whole by each rank) and a large one
// (split into shares).
TEST_P(GlooCommunicatorTest, AllReduceGivesEveryRankTheSameBits) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : {std::size_t{7}, std::size_t{40000}}) {
      std::vector<float> v(count);
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = (r % 2 == 0 ? 1e8f : 1.0f) / static_cast<float>(i % 7 + r + 1);
      }
      comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
      std::vector<float> all(count * n);
      comm.allgather(v.data(), all.data(), count);
      for (int q = 1; q < n; ++q) {
        ASSERT_EQ(0, std::memcmp(all.data(), all.data() + q * count,
                                 count * sizeof(float)))
            << "rank " << q << " got other bits than rank 0, count " << count;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, GlooCommunicatorTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
      return std::to_string(std::get<0>(info.param)) + "ranks" +
             (std::get<1>(info.param) ? "Arena" : "Gloo");
    });

TEST(GlooCommunicatorErrorsTest, InvalidPeerAndRootNameTheRankAndOperation) {
  RunRanks(2, [](Communicator& comm) {
    int x = 0;
    try {
      comm.send(&x, 1, comm.rank());
      ADD_FAILURE() << "send to self did not throw";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("/2] send: the peer is this rank itself; "
                                      "a blocking send completes only when"));
    }
    try {
      comm.recv(&x, 1, 5);
      ADD_FAILURE() << "recv from rank 5 of 2 did not throw";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("/2] recv: invalid peer rank 5 (the "
                                      "ranks are 0 to 1)"));
    }
    EXPECT_THROW(comm.broadcast(&x, 1, 2), CommError);
    // Refused before anything was sent: the communicator is still fine.
    EXPECT_FALSE(comm.failed());
    comm.barrier();
  });
}

TEST(GlooCommunicatorErrorsTest, RecvTimeoutNamesTheOperationAndPeer) {
  std::atomic<bool> recv_done{false};
  RunRanks(
      2,
      [&recv_done](Communicator& comm) {
        if (comm.rank() == 1) {
          int x = 0;
          EXPECT_FALSE(comm.failed());
          try {
            comm.recv(&x, 1, 0, /*tag=*/9);
            ADD_FAILURE() << "recv without a sender returned";
          } catch (const CommError& e) {
            EXPECT_THAT(e.what(),
                        HasSubstr("[rank 1/2] recv of 1 int32 from rank 0 "
                                  "(tag 9) failed"));
          }
          // What a pooled rank checks before it takes another test.
          EXPECT_TRUE(comm.failed());
          recv_done = true;
        } else {
          // Rank 0 stays connected, sending nothing, until the recv has
          // timed out: a closed connection would fail it another way.
          while (!recv_done) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      },
      std::chrono::milliseconds(500));
}

// A peer that never comes: the error says what could not be done, once
// ("cannot connect the gloo mesh: ...", not "... mesh failed: ..."), and
// which rank never came (not only the store's key), on each rank that came:
// the highest (the others have its addresses) or the lowest (each waits for
// its host name before it puts its own addresses).
TEST(GlooCommunicatorErrorsTest, PeerThatNeverComesFailsTheConnectNamingIt) {
  for (int absent : {2, 0}) {
    testing::ServerThread store;
    const std::vector<int> came =
        absent == 2 ? std::vector<int>{1, 0} : std::vector<int>{2, 1};
    std::vector<std::string> errors(3, "connected without its peer");
    auto connect = [&](int rank, std::chrono::milliseconds timeout) {
      TcpStore client("127.0.0.1", store.port(), timeout);
      GlooOptions options;
      options.timeout = timeout;
      try {
        GlooCommunicator::Create(client, rank, 3, options);
      } catch (const CommError& e) {
        errors[rank] = e.what();
      }
    };
    // The first to come waits longest: the other, which gives up first,
    // finds what the first put in the store.
    std::thread first(connect, came[0], std::chrono::milliseconds(3000));
    TcpStore watch("127.0.0.1", store.port(), std::chrono::seconds(60));
    watch.wait({fmt::format("gloo/rank_{}", came[0])});
    connect(came[1], std::chrono::milliseconds(300));
    first.join();
    for (int rank : came) {
      EXPECT_THAT(errors[rank],
                  HasSubstr(fmt::format("[rank {}/3] cannot connect the gloo "
                                        "mesh: rank {} of 3 never came to "
                                        "connect",
                                        rank, absent)));
      EXPECT_THAT(errors[rank], ::testing::Not(HasSubstr("mesh failed")));
    }
  }
}

// A store that cannot be reached fails the connect with its own words, and is
// not asked again which ranks came: each such question waited as long as
// the first (trial 11: twice the timeout).
TEST(GlooCommunicatorErrorsTest, AStoreThatCannotBeReachedIsAskedOnce) {
  class Unreachable : public Store {
   public:
    void set(std::string_view, const std::vector<char>&) override { Fail(); }
    std::vector<char> get(std::string_view) override { Fail(); }
    int64_t add(std::string_view, int64_t) override { Fail(); }
    bool check(const std::vector<std::string>&) override {
      ++questions;
      Fail();
    }
    void wait(const std::vector<std::string>&) override { Fail(); }
    bool remove(std::string_view) override { Fail(); }
    int questions = 0;

   private:
    [[noreturn]] static void Fail() {
      throw StoreError(
          "cannot connect to store at 127.0.0.1:1 within 100 ms: Connection "
          "refused");
    }
  };
  Unreachable store;
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(100);
  try {
    GlooCommunicator::Create(store, 1, 2, options);
    ADD_FAILURE() << "connected through no store";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Connection refused"));
  }
  EXPECT_EQ(store.questions, 0);
}

// Rank 0 says 2 ranks, rank 1 says 4 (an off-by-one in the caller): both
// say so, instead of Gloo's "sizeof(impl_) == bytes.size(). 136 vs 272".
TEST(GlooCommunicatorErrorsTest, RanksThatPassDifferentSizesSaySo) {
  testing::ServerThread store;
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      TcpStore client("127.0.0.1", store.port(),
                      std::chrono::milliseconds(2000));
      try {
        GlooCommunicator::Create(client, rank, rank == 0 ? 2 : 4, options);
      } catch (const CommError& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  // Whichever rank reads the other's address list first says so.
  EXPECT_THAT(errors[0] + errors[1],
              HasSubstr("the ranks passed different world sizes (this rank "
                        "passed "))
      << errors[0] << "\n"
      << errors[1];
}

// Threads of this process whose policy is SCHED_BATCH.
std::set<pid_t> BatchThreads() {
  std::set<pid_t> tids;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    pid_t tid = std::atoi(task.path().filename().c_str());
    if (sched_getscheduler(tid) == SCHED_BATCH) tids.insert(tid);
  }
  return tids;
}

// Times a thread of this process has gone to sleep.
long VoluntarySwitches(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
      return std::stol(line.substr(line.find(':') + 1));
    }
  }
  return -1;
}

class GlooCommunicatorSchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sched_getscheduler(0) != SCHED_OTHER) {
      GTEST_SKIP() << "this test process does not run as SCHED_OTHER";
    }
    bool allowed = false;
    std::thread probe([&] {
      sched_param none{};
      allowed = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
    });
    probe.join();
    if (!allowed) {
      GTEST_SKIP() << "this machine does not let a thread change its policy";
    }
    before_ = BatchThreads();
  }
  // The SCHED_BATCH threads started since SetUp (joined threads may linger
  // in /proc a moment; those are gone from the set by then or were there
  // before).
  std::set<pid_t> NewBatchThreads() const {
    std::set<pid_t> now = BatchThreads();
    for (pid_t tid : before_) now.erase(tid);
    return now;
  }

 private:
  std::set<pid_t> before_;
};

// Gloo's event-loop thread is SCHED_BATCH (so that it does not preempt the
// rank's main thread while that holds a pair's lock); the thread that made
// the communicator keeps its own policy.
TEST_F(GlooCommunicatorSchedulingTest, LoopThreadIsBatchAndCallerUnchanged) {
  RunRanks(1, [&](Communicator&) {
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    EXPECT_EQ(NewBatchThreads().size(), 1u);
  });
}

TEST_F(GlooCommunicatorSchedulingTest, CallerWithItsOwnPolicyKeepsIt) {
  // The rank thread that RunRanks starts inherits the policy.
  std::thread caller([] {
    sched_param none{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_IDLE, &none), 0);
    RunRanks(1, [](Communicator& comm) {
      EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
      comm.barrier();
    });
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  });
  caller.join();
}

// A paused event loop sleeps instead of waking every 10 ms; the next
// operation resumes it.
TEST_F(GlooCommunicatorSchedulingTest, PausedEventLoopSleepsUntilTheNextOp) {
  RunRanks(1, [&](Communicator& comm) {
    auto& gloo = dynamic_cast<GlooCommunicator&>(comm);
    const std::set<pid_t> loops = NewBatchThreads();
    ASSERT_EQ(loops.size(), 1u);
    const pid_t loop = *loops.begin();
    const auto wakeups_over_200ms = [&] {
      long before = VoluntarySwitches(loop);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return VoluntarySwitches(loop) - before;
    };
    // Whether the loop wakes 4 times within 5 s (an idle one wakes every
    // 10 ms; a busy machine may delay it, not stop it).
    const auto wakes = [&] {
      const long before = VoluntarySwitches(loop);
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (VoluntarySwitches(loop) - before < 4) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return true;
    };
    EXPECT_TRUE(wakes()) << "an idle loop wakes every 10 ms";
    gloo.PauseEventLoop();
    EXPECT_TRUE(gloo.event_loop_paused());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_LE(wakeups_over_200ms(), 1);
    std::vector<float> v(4, 2.0f);
    comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
    EXPECT_FALSE(gloo.event_loop_paused());
    EXPECT_EQ(v[0], 2.0f);
    EXPECT_TRUE(wakes());
  });
}

// Ranks that pause between operations still meet: the first operation
// resumes each one's loop.
TEST(GlooCommunicatorPauseTest, PausedRanksStillMeet) {
  RunRanks(3, [](Communicator& comm) {
    auto& gloo = dynamic_cast<GlooCommunicator&>(comm);
    for (int round = 0; round < 3; ++round) {
      gloo.PauseEventLoop();
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * comm.rank()));
      std::int64_t x = comm.rank() + round;
      comm.allreduce(&x, 1, ReduceOp::kSum);
      EXPECT_EQ(x, 3 + 3 * round);
      comm.barrier();
    }
    gloo.PauseEventLoop();  // The destructor resumes it.
  });
}

}  // namespace
}  // namespace disttest
