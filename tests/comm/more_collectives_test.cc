// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// reduce, reduce_scatter, gather, scatter, alltoall, alltoallv and
// allgatherv, the out-of-place allreduce and broadcast, kAvg, the 16-bit
// floating-point types, split, isend and irecv, and timeouts for one
// operation, of the Gloo communicator, with and without the host arena,
// each against a serial reference computed here, for 1 to 8 ranks (threads
// of this process) and counts from 0 to 2^20 elements; and ranks that
// disagree about them fail.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/host_arena.h"
#include "comm/thread_ranks.h"
#include "disttest/comm/collective_call.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/error.h"
#include "support/edge_reductions.h"

namespace disttest {
namespace {

using ::testing::HasSubstr;
using testing::RunRanks;

// Rank r's element i: distinct for every rank and element, small enough
// that a sum over 8 ranks does not overflow.
std::int32_t Value(int r, std::size_t i) {
  return static_cast<std::int32_t>((i * 7919 + 13) % 100003) * 10 + r;
}

// The counts a collective is tried with; the largest is 2^20 elements for
// all ranks together.
std::vector<std::size_t> Counts(int world) {
  return {0, 1, 3, 1000, 17000, (std::size_t{1} << 20) / world};
}

// World size, and whether the ranks share a HostArena that carries data.
class CollectivesTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int World() const { return std::get<0>(GetParam()); }
  void Run(const std::function<void(Communicator&)>& body) {
    RunRanks(World(), body, std::chrono::seconds(60),
             std::get<1>(GetParam()) ? HostArena::Create(World()) : nullptr);
  }
};

TEST_P(CollectivesTest, ReduceToEveryRoot) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<std::int32_t> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = Value(r, i);
      for (int root = 0; root < n; root += std::max(1, n - 1)) {
        std::vector<std::int32_t> out(count, -1);
        comm.reduce(in.data(), out.data(), count, ReduceOp::kSum, root);
        for (std::size_t i = 0; i < count; ++i) {
          std::int32_t want = 0;
          for (int q = 0; q < n; ++q) want += Value(q, i);
          ASSERT_EQ(out[i], r == root ? want : -1)
              << "count " << count << ", root " << root << ", element " << i;
        }
      }
    }
    // In place on the root, with max.
    std::vector<std::int32_t> v(5, r);
    comm.reduce(v.data(), v.data(), v.size(), ReduceOp::kMax, 0);
    if (r == 0) {
      EXPECT_EQ(v, std::vector<std::int32_t>(5, n - 1));
    }
  });
}

TEST_P(CollectivesTest, ReduceScatterGivesEachRankItsPart) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<std::int32_t> in(count * n);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = Value(r, i);
      std::vector<std::int32_t> out(count, -1);
      comm.reduce_scatter(in.data(), out.data(), count, ReduceOp::kSum);
      for (std::size_t i = 0; i < count; ++i) {
        std::int32_t want = 0;
        for (int q = 0; q < n; ++q) want += Value(q, r * count + i);
        ASSERT_EQ(out[i], want) << "count " << count << ", element " << i;
      }
    }
  });
}

TEST_P(CollectivesTest, GatherPutsEachRankAtItsOffsetOnTheRoot) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<std::int32_t> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = Value(r, i);
      const int root = n - 1;
      std::vector<std::int32_t> out(r == root ? count * n : 0);
      comm.gather(in.data(), out.data(), count, root);
      if (r != root) continue;
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[q * count + i], Value(q, i))
              << "count " << count << ", rank " << q << ", element " << i;
        }
      }
    }
  });
}

TEST_P(CollectivesTest, ScatterGivesEachRankItsPartOfTheRoots) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<std::int32_t> in(r == 0 ? count * n : 0);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = Value(0, i);
      std::vector<std::int32_t> out(count, -1);
      comm.scatter(in.data(), out.data(), count, 0);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], Value(0, r * count + i))
            << "count " << count << ", element " << i;
      }
    }
  });
}

TEST_P(CollectivesTest, AllToAllTransposesTheParts) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      if (count * n * n > (std::size_t{1} << 22)) count /= n;  // Memory.
      std::vector<std::int32_t> in(count * n);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = Value(r, i);
      std::vector<std::int32_t> out(count * n, -1);
      comm.alltoall(in.data(), out.data(), count);
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[q * count + i], Value(q, r * count + i))
              << "count " << count << ", from rank " << q << ", element " << i;
        }
      }
      // In place.
      comm.alltoall(in.data(), in.data(), count);
      EXPECT_EQ(in, out);
    }
  });
}

TEST_P(CollectivesTest, AllGatherVPacksRanksOfDifferentCounts) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t base : Counts(n)) {
      // Rank q gives base * q / n + q elements; rank 0 none when base is 0.
      std::vector<std::size_t> counts(n);
      for (int q = 0; q < n; ++q) counts[q] = base * q / n + q;
      std::vector<std::int32_t> in(counts[r]);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = Value(r, i);
      std::vector<std::int32_t> out(
          std::accumulate(counts.begin(), counts.end(), std::size_t{0}), -1);
      comm.allgatherv(in.data(), out.data(), counts);
      std::size_t at = 0;
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < counts[q]; ++i, ++at) {
          ASSERT_EQ(out[at], Value(q, i))
              << "base " << base << ", rank " << q << ", element " << i;
        }
      }
    }
  });
}

TEST_P(CollectivesTest, AllToAllVMovesEachRanksOwnCounts) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t base : Counts(n)) {
      // Rank a sends rank b (base * (a + b + 1) / (2n)) + (a + 2b) % 3
      // elements: every pair its own count, some of them 0.
      const auto count = [&](int a, int b) {
        return base * static_cast<std::size_t>(a + b + 1) /
                   static_cast<std::size_t>(2 * n) +
               static_cast<std::size_t>((a + 2 * b) % 3);
      };
      std::vector<std::size_t> in_counts(n), out_counts(n);
      for (int q = 0; q < n; ++q) {
        in_counts[q] = count(r, q);
        out_counts[q] = count(q, r);
      }
      // Element i of what rank a sends rank b: Value(a, b * 1000003 + i).
      std::vector<std::int32_t> in;
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < in_counts[q]; ++i) {
          in.push_back(Value(r, q * 1000003 + i));
        }
      }
      std::vector<std::int32_t> out(
          std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}),
          -1);
      comm.alltoallv(in.data(), in_counts, out.data(), out_counts);
      std::size_t at = 0;
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < out_counts[q]; ++i, ++at) {
          ASSERT_EQ(out[at], Value(q, r * 1000003 + i))
              << "base " << base << ", from rank " << q << ", element " << i;
        }
      }
    }
  });
}

TEST_P(CollectivesTest, OutOfPlaceAllReduceAndBroadcastLeaveTheirInput) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<std::int32_t> in(count), out(count, -1);
      for (std::size_t i = 0; i < count; ++i) in[i] = Value(r, i);
      const std::vector<std::int32_t> before = in;
      comm.allreduce(in.data(), out.data(), count, ReduceOp::kMax);
      ASSERT_EQ(in, before);
      for (std::size_t i = 0; i < count; ++i) {
        std::int32_t want = Value(0, i);
        for (int q = 1; q < n; ++q) want = std::max(want, Value(q, i));
        ASSERT_EQ(out[i], want) << "count " << count << ", element " << i;
      }
      const int root = n - 1;
      std::fill(out.begin(), out.end(), -1);
      comm.broadcast(in.data(), out.data(), count, root);
      ASSERT_EQ(in, before);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], Value(root, i)) << "count " << count;
      }
    }
  });
}

// kAvg: the sum over the ranks divided by their number, in the element
// type (allreduce, reduce and reduce_scatter alike); the integer types
// refuse it.
TEST_P(CollectivesTest, AverageOfTheFloatingPointTypes) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    std::vector<double> d(1000);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = r * 1.5 + i;
    comm.allreduce(d.data(), d.size(), ReduceOp::kAvg);
    for (std::size_t i = 0; i < d.size(); ++i) {
      ASSERT_DOUBLE_EQ(d[i], 1.5 * (n - 1) / 2.0 + i) << i;
    }
    std::vector<float> part(2 * n, static_cast<float>(r)), mine(2);
    comm.reduce_scatter(part.data(), mine.data(), 2, ReduceOp::kAvg);
    EXPECT_FLOAT_EQ(mine[0], (n - 1) / 2.0f);
    bfloat16 b(static_cast<float>(2 * r)), root_avg;
    comm.reduce(&b, &root_avg, 1, ReduceOp::kAvg, 0);
    if (r == 0) {
      EXPECT_EQ(static_cast<float>(root_avg), static_cast<float>(n - 1));
    }
    std::int32_t i = r;
    try {
      comm.allreduce(&i, 1, ReduceOp::kAvg);
      ADD_FAILURE() << "an int32 average did not throw";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("allreduce of int32: avg is for the "
                            "floating-point types (float16, bfloat16, "
                            "float32, float64), not int32"));
    }
  });
}

// float16 and bfloat16 through every kind of collective: sums exact in the
// type, and the reduction in rank order on every rank (the same bits).
TEST_P(CollectivesTest, HalfTypesReduceInTheirOwnPrecision) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    for (std::size_t count : Counts(n)) {
      std::vector<float16> h(count);
      std::vector<bfloat16> b(count);
      for (std::size_t i = 0; i < count; ++i) {
        h[i] = float16(static_cast<float>(r + (i % 64)));
        b[i] = bfloat16(static_cast<float>(r * 2 + (i % 32)));
      }
      comm.allreduce(h.data(), count, ReduceOp::kSum);
      comm.allreduce(b.data(), count, ReduceOp::kMax);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(static_cast<float>(h[i]),
                  static_cast<float>(n * (n - 1) / 2 + n * (i % 64)))
            << "count " << count << ", element " << i;
        ASSERT_EQ(static_cast<float>(b[i]),
                  static_cast<float>((n - 1) * 2 + (i % 32)));
      }
      std::vector<bfloat16> all(count * n);
      comm.allgather(b.data(), all.data(), count);
      for (std::size_t i = 0; i < all.size(); ++i) {
        ASSERT_EQ(all[i], b[i % std::max<std::size_t>(count, 1)]);
      }
    }
  });
}

// split: ranks of one color get a communicator of their own, ranked by key;
// its collectives see those ranks only; kNoColor gets none.
TEST_P(CollectivesTest, SplitMakesACommunicatorPerColor) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    // Even and odd ranks, ranked from the highest down; rank 0 takes no part
    // when there are more than 2.
    const int color = n > 2 && r == 0 ? Communicator::kNoColor : r % 2;
    std::unique_ptr<Communicator> sub = comm.split(color, /*key=*/n - r);
    if (color == Communicator::kNoColor) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr);
      std::vector<int> members;
      for (int q = n - 1; q >= 0; --q) {
        if (q % 2 == color && !(n > 2 && q == 0)) members.push_back(q);
      }
      EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
      EXPECT_EQ(members[sub->rank()], r);
      std::int64_t sum = r;
      sub->allreduce(&sum, 1, ReduceOp::kSum);
      EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(),
                                     std::int64_t{0}));
      sub->barrier();
    }
    // The parent goes on.
    std::int32_t x = 1;
    comm.allreduce(&x, 1, ReduceOp::kSum);
    EXPECT_EQ(x, n);
    EXPECT_THROW(comm.split(-2), CommError);
  });
}

// isend and irecv: every rank sends every other rank several messages at
// once, of every size up to the largest count, and receives them in another
// order (by tag); and a blocking recv pairs with an isend.
TEST_P(CollectivesTest, NonBlockingSendsAndReceivesPairByPeerAndTag) {
  Run([](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    const std::vector<std::size_t> sizes = {0, 1, 1000,
                                            (std::size_t{1} << 18) / n};
    std::vector<std::vector<std::int32_t>> out, in;
    std::vector<Request> sends, recvs;
    std::vector<std::tuple<int, std::size_t>> expect;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        out.emplace_back(sizes[t]);
        for (std::size_t i = 0; i < sizes[t]; ++i) {
          out.back()[i] = Value(r, q * 100 + t * 1000003 + i);
        }
        sends.push_back(comm.isend(out.back().data(), sizes[t], q,
                                   static_cast<std::uint32_t>(t)));
      }
    }
    in.reserve(static_cast<std::size_t>(n) * sizes.size());
    for (int q = n - 1; q >= 0; --q) {
      if (q == r) continue;
      for (std::size_t t = sizes.size(); t-- > 0;) {
        in.emplace_back(sizes[t], -1);
        recvs.push_back(comm.irecv(in.back().data(), sizes[t], q,
                                   static_cast<std::uint32_t>(t)));
        expect.emplace_back(q, t);
      }
    }
    for (Request& s : sends) s.wait();
    for (Request& q : recvs) q.wait();
    for (std::size_t k = 0; k < expect.size(); ++k) {
      const auto [q, t] = expect[k];
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(in[k][i], Value(q, r * 100 + t * 1000003 + i))
            << "from rank " << q << ", tag " << t << ", element " << i;
      }
    }
    if (n >= 2) {
      std::int64_t v = r, got = -1;
      const int to = (r + 1) % n, from = (r + n - 1) % n;
      Request s = comm.isend(&v, 1, to, 77);
      comm.recv(&got, 1, from, 77);
      s.wait();
      EXPECT_EQ(got, from);
      EXPECT_FALSE(s.pending());
    }
  });
}

// A timeout for one operation (ScopedTimeout): a receive that nobody
// answers fails after it, not after the communicator's, which comes back.
TEST_P(CollectivesTest, ScopedTimeoutBoundsOneOperation) {
  if (World() < 2) GTEST_SKIP() << "needs a peer";
  // Rank 0 keeps its side open until rank 1's receive has given up.
  std::atomic<bool> gave_up{false};
  Run([&](Communicator& comm) {
    EXPECT_EQ(comm.timeout(), std::chrono::seconds(60));
    if (comm.rank() == 1) {
      const auto start = std::chrono::steady_clock::now();
      {
        ScopedTimeout quick(comm, std::chrono::milliseconds(300));
        EXPECT_EQ(comm.timeout(), std::chrono::milliseconds(300));
        std::int32_t x = 0;
        try {
          comm.recv(&x, 1, 0, /*tag=*/42);
          ADD_FAILURE() << "a receive nobody answered returned";
        } catch (const CommError& e) {
          EXPECT_THAT(e.what(), HasSubstr("[rank 1/"));
          EXPECT_THAT(e.what(), HasSubstr("300"));
        }
      }
      gave_up = true;
      EXPECT_LT(std::chrono::steady_clock::now() - start,
                std::chrono::seconds(30));
      EXPECT_EQ(comm.timeout(), std::chrono::seconds(60));
    } else if (comm.rank() == 0) {
      while (!gave_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_THROW(comm.set_timeout(std::chrono::milliseconds(0)), CommError);
  });
}

// Every element type, through the new collectives and allreduce: a bool's
// sum is "or" and its prod "and".
template <typename T>
void CheckType(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  SCOPED_TRACE(Name(internal::DataTypeOf<T>()));
  std::vector<T> part(3 * n, static_cast<T>(r + 1));
  std::vector<T> out(3, T{});
  comm.reduce_scatter(part.data(), out.data(), 3, ReduceOp::kMax);
  EXPECT_EQ(out, std::vector<T>(3, static_cast<T>(n)));
  std::vector<T> gathered(3 * n);
  comm.allgatherv(part.data(), gathered.data(), std::vector<std::size_t>(n, 3));
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(gathered[3 * q], static_cast<T>(q + 1));
  }
}

TEST_P(CollectivesTest, EveryElementType) {
  Run([](Communicator& comm) {
    CheckType<std::int8_t>(comm);
    CheckType<std::uint8_t>(comm);
    CheckType<std::int16_t>(comm);
    CheckType<std::uint16_t>(comm);
    CheckType<std::int32_t>(comm);
    CheckType<std::uint32_t>(comm);
    CheckType<long>(comm);
    CheckType<long long>(comm);
    CheckType<unsigned long long>(comm);
    CheckType<char>(comm);
    CheckType<float>(comm);
    CheckType<double>(comm);
    CheckType<float16>(comm);
    CheckType<bfloat16>(comm);
    const int n = comm.size(), r = comm.rank();
    // bool: "or" of one true rank, "and" of all but one.
    bool any = r == n - 1, all = r != 0 || n == 1;
    comm.allreduce(&any, 1, ReduceOp::kSum);
    comm.allreduce(&all, 1, ReduceOp::kProd);
    EXPECT_TRUE(any);
    EXPECT_EQ(all, n == 1);
    bool mine = r % 2 == 0, root_or = false;
    comm.reduce(&mine, &root_or, 1, ReduceOp::kMax, 0);
    if (r == 0) {
      EXPECT_TRUE(root_or);
    }
  });
}

// Small integers that wrap, a NaN on the last rank only, -0 against +0:
// the same results as a serial program's, through the arena and Gloo alike.
TEST_P(CollectivesTest, EdgesOfTheElementTypesReduceAlikeOnEveryPath) {
  Run([](Communicator& comm) { testing::CheckEdgeReductions(comm); });
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, CollectivesTest,
    ::testing::Combine(::testing::Range(1, 9), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
      return std::to_string(std::get<0>(info.param)) + "ranks" +
             (std::get<1>(info.param) ? "Arena" : "Gloo");
    });

// Ranks that disagree about one of these collectives all fail at once,
// naming each rank's call, whether the arena carries the data or only
// compares the calls (Gloo carries it).
class CollectivesMismatchTest : public ::testing::TestWithParam<bool> {
 protected:
  // Runs `body` in 2 ranks; returns each rank's error.
  std::vector<std::string> Errors(
      const std::function<void(Communicator&)>& body) {
    std::vector<std::string> errors(2);
    RunRanks(
        2,
        [&](Communicator& comm) {
          try {
            body(comm);
            ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
          } catch (const CommError& e) {
            errors[comm.rank()] = e.what();
          }
        },
        std::chrono::seconds(30), HostArena::Create(2, GetParam()));
    return errors;
  }
};

TEST_P(CollectivesMismatchTest, ReduceAgainstAllReduce) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<float> v(8, 1.0f);
    if (comm.rank() == 0) {
      comm.reduce(v.data(), v.data(), v.size(), ReduceOp::kSum, 0);
    } else {
      comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
    }
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("rank 0: reduce(8 x float32, sum, root 0); "
                             "rank 1: allreduce(8 x float32, sum)"));
  }
  EXPECT_THAT(errors[0], HasSubstr("[rank 0/2] reduce of 8 float32"));
}

TEST_P(CollectivesMismatchTest, GatherToDifferentRoots) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::int32_t> in(4, 0), out(8);
    comm.gather(in.data(), out.data(), 4, comm.rank());
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("rank 0: gather(4 x int32, root 0); rank 1: "
                             "gather(4 x int32, root 1)"));
  }
}

TEST_P(CollectivesMismatchTest, AllGatherVWithDifferentCounts) {
  auto errors = Errors([](Communicator& comm) {
    // Rank 1 thinks rank 0 sends 2 elements, rank 0 thinks 3: the totals
    // differ and so do the counts.
    std::vector<std::size_t> counts = {comm.rank() == 0 ? 3u : 2u, 2};
    std::vector<double> in(counts[comm.rank()]), out(5);
    comm.allgatherv(in.data(), out.data(), counts);
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("does not match across the 2 ranks: rank 0: "
                             "allgatherv(5 x float64, counts {3, 2})"));
    EXPECT_THAT(e, HasSubstr("rank 1: allgatherv(4 x float64, counts {2, "
                             "2})"));
  }
}

TEST_P(CollectivesMismatchTest, AllGatherVWithTheSameTotalButOtherCounts) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::size_t> counts = comm.rank() == 0
                                          ? std::vector<std::size_t>{1, 3}
                                          : std::vector<std::size_t>{3, 1};
    std::vector<std::int64_t> in(counts[comm.rank()]), out(4);
    comm.allgatherv(in.data(), out.data(), counts);
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("does not match across the 2 ranks"));
  }
}

TEST_P(CollectivesMismatchTest, ScatterRootOutOfRangeFailsEveryRank) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::int32_t> in(4), out(2);
    comm.scatter(in.data(), out.data(), 2, comm.rank() == 0 ? 7 : 0);
  });
  EXPECT_THAT(errors[0], HasSubstr("[rank 0/2] scatter: invalid root rank 7"));
  EXPECT_THAT(errors[1], HasSubstr("rank 0: scatter(2 x int32, root 7); "
                                   "rank 1: scatter(2 x int32, root 0)"));
}

// Counts of an alltoallv that do not pair up (rank 0 sends rank 1 three,
// rank 1 expects four): every rank fails at once, naming the pair.
TEST_P(CollectivesMismatchTest, AllToAllVCountsThatDoNotPairUpNameThePair) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::size_t> in_counts = {1, 3}, out_counts = {1, 4};
    if (comm.rank() == 1) {
      in_counts = {4, 1};
      out_counts = {4, 1};
    }
    std::vector<std::int32_t> in(5), out(5);
    comm.alltoallv(in.data(), in_counts, out.data(), out_counts);
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("rank 0 sends 3 x int32 to rank 1, which "
                             "expects 4"));
  }
  EXPECT_THAT(errors[1], HasSubstr("[rank 1/2] alltoallv of 5 int32 sent"));
}

// An alltoallv against an alltoall: a mismatch like any other.
TEST_P(CollectivesMismatchTest, AllToAllVAgainstAllToAll) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::int32_t> in(2), out(2);
    std::vector<std::size_t> counts = {1, 1};
    if (comm.rank() == 0) {
      comm.alltoallv(in.data(), counts, out.data(), counts);
    } else {
      comm.alltoall(in.data(), out.data(), 1);
    }
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("rank 0: alltoallv(int32); rank 1: "
                             "alltoall(1 x int32)"));
  }
}

TEST_P(CollectivesMismatchTest, AverageAgainstSum) {
  auto errors = Errors([](Communicator& comm) {
    float x = 1;
    comm.allreduce(&x, 1, comm.rank() == 0 ? ReduceOp::kAvg : ReduceOp::kSum);
  });
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("rank 0: allreduce(1 x float32, avg); rank 1: "
                             "allreduce(1 x float32, sum)"));
  }
}

TEST_P(CollectivesMismatchTest, AllGatherVWithTooFewCountsNamesThem) {
  auto errors = Errors([](Communicator& comm) {
    std::vector<std::size_t> counts(comm.rank() == 0 ? 1 : 2, 1);
    std::vector<float> in(1), out(2);
    comm.allgatherv(in.data(), out.data(), counts);
  });
  EXPECT_THAT(errors[0],
              HasSubstr("[rank 0/2] allgatherv: 1 counts given, one per rank "
                        "is 2"));
  EXPECT_THAT(errors[1], HasSubstr("does not match across the 2 ranks"));
}

INSTANTIATE_TEST_SUITE_P(ArenaCarries, CollectivesMismatchTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Data" : "OnlyCalls";
                         });

}  // namespace
}  // namespace disttest
