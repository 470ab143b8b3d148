// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// reduce, reduce_scatter, gather, scatter, alltoall and allgatherv of the
// Gloo communicator, with and without the host arena, each against a serial
// reference computed here, for 1 to 8 ranks (threads of this process) and
// counts from 0 to 2^20 elements; and ranks that disagree about them fail.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "comm/host_arena.h"
#include "comm/thread_ranks.h"
#include "disttest/comm/collective_call.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/error.h"

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
                             "allgatherv(5 x float64, counts #"));
    EXPECT_THAT(e, HasSubstr("rank 1: allgatherv(4 x float64, counts #"));
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
