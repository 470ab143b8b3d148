// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// launch(): the public entry point with one thread per rank, its errors, and
// the harness's options().parallel, where every rank of a DIST_TEST_F checks
// that an allreduce in each of its groups sums exactly that group's members.
#include "disttest/launch/launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "disttest/comm/create.h"
#include "disttest/disttest.h"
#include "disttest/rendezvous/tcp_store.h"
#include "launch/launch_internal.h"
#include "support/loopback_socket.h"

namespace disttest {
namespace {

using testing::FreePort;
using ::testing::HasSubstr;

// What `rank` gets when every rank contributes rank + 1 in `group`.
int GroupSum(const std::vector<int>& group) {
  int sum = 0;
  for (int member : group) sum += member + 1;
  return sum;
}

// Checks every group of `ctx` with an allreduce; returns the failures.
std::vector<std::string> CheckGroups(Context& ctx) {
  std::vector<std::string> problems;
  for (ParallelMode mode : kAllParallelModes) {
    Communicator& group = ctx.group(mode);
    if (group.rank() != ctx.rank_in(mode) || group.size() != ctx.size(mode)) {
      problems.push_back(std::string(Name(mode)) + ": wrong rank or size");
    }
    int value = ctx.rank() + 1;
    group.allreduce(&value, 1, ReduceOp::kSum);
    const int want = GroupSum(ctx.layout().group_of(mode, ctx.rank()));
    if (value != want) {
      problems.push_back(
          std::string(Name(mode)) + ": rank " + std::to_string(ctx.rank()) +
          " got " + std::to_string(value) + ", want " + std::to_string(want));
    }
  }
  return problems;
}

TEST(LaunchTest, ThreadsAsRanksBuildEveryGroup) {
  constexpr int kWorld = 4;
  const Config config =
      Config::FromJson(R"({"parallel": {"tensor": 2, "zero1": 1}})");
  const int port = FreePort();
  std::vector<std::vector<std::string>> problems(kWorld);
  std::vector<int> local_ranks(kWorld), local_sizes(kWorld), devices(kWorld);
  std::vector<std::uint64_t> tensor_seeds(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      try {
        Context ctx =
            launch(config, r, kWorld, "127.0.0.1", port, Backend::kGloo);
        problems[r] = CheckGroups(ctx);
        local_ranks[r] = ctx.local_rank();
        local_sizes[r] = ctx.local_size();
        devices[r] = ctx.device();
        tensor_seeds[r] = ctx.seed(ParallelMode::kTensor);
        ctx.store().set("done/" + std::to_string(r), "1");
        // Rank 0 hosts the store: it stays until every rank is done with it.
        if (r == 0) {
          std::vector<std::string> keys;
          for (int p = 0; p < kWorld; ++p)
            keys.push_back("done/" + std::to_string(p));
          ctx.store().wait(keys);
        }
      } catch (const std::exception& e) {
        problems[r].push_back(e.what());
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_THAT(problems[r], ::testing::IsEmpty()) << "rank " << r;
    EXPECT_EQ(local_ranks[r], r);  // All on this host, in rank order.
    EXPECT_EQ(local_sizes[r], kWorld);
    EXPECT_EQ(devices[r], -1);  // Gloo: no device.
    EXPECT_EQ(tensor_seeds[r], 1024u + r % 2);
  }
}

// Each rank reads its own config and seed: ranks given other parallel
// sizes made groups that never met ("rank 1 of 2 never came to connect",
// trial 11), and other seeds passed silently. Both fail on every rank,
// naming what differs.
TEST(LaunchTest, RanksGivenAnotherConfigOrSeedFailNamingIt) {
  struct Case {
    const char* config1;
    std::uint64_t seed1;
    const char* says;
  };
  for (const Case& c :
       {Case{R"({"parallel": {"tensor": 2}})", 1024,
             "rank 1 was given another seed or config than rank 0: seed "
             "1024, data 1, tensor 2, pipeline 1, zero1 1 (rank 0: seed 1024, "
             "data 2, tensor 1, pipeline 1, zero1 2)"},
        Case{"{}", 7,
             "rank 1 was given another seed or config than rank 0: seed 7, "
             "data 2, tensor 1, pipeline 1, zero1 2 (rank 0: seed 1024"}}) {
    const int port = FreePort();
    std::vector<std::string> errors(2, "no error");
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        try {
          launch(Config::FromJson(r == 0 ? "{}" : c.config1), r, 2, "127.0.0.1",
                 port, Backend::kGloo, std::nullopt, r == 0 ? 1024 : c.seed1);
        } catch (const ConfigError& e) {
          errors[r] = e.what();
        }
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_THAT(errors[r], HasSubstr(c.says)) << "rank " << r;
    }
  }
}

// A second process as rank 1 (RANK given twice) ends at once saying so: it
// failed to connect, or waited out five times the timeout (trial 11).
TEST(LaunchTest, ASecondProcessAsOneRankEndsSayingSo) {
  // Without the check the duplicate waits out the timeout: a short one.
  const char* had = std::getenv("DISTTEST_TIMEOUT");
  const std::string timeout = had != nullptr ? had : "";
  setenv("DISTTEST_TIMEOUT", "10", 1);
  const int port = FreePort();
  std::promise<void> duplicate_done;
  std::shared_future<void> done = duplicate_done.get_future().share();
  std::vector<std::string> errors(2, "no error");
  std::atomic<int> launched{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        Context ctx = launch(Config{}, r, 2, "127.0.0.1", port, Backend::kGloo);
        ++launched;
        done.wait();  // Rank 0 serves the store till the duplicate is done.
      } catch (const std::exception& e) {
        errors[r] = e.what();
        ++launched;
      }
    });
  }
  while (launched.load() < 2) std::this_thread::yield();
  std::string duplicate = "no error";
  try {
    launch(Config{}, 1, 2, "127.0.0.1", port, Backend::kGloo);
  } catch (const std::exception& e) {
    duplicate = e.what();
  }
  duplicate_done.set_value();
  for (std::thread& t : ranks) t.join();
  EXPECT_THAT(
      duplicate,
      HasSubstr("launch(): two processes came to the store at "
                "127.0.0.1:" +
                std::to_string(port) + " as rank 1 of 2: this one (process "));
  EXPECT_THAT(errors, ::testing::Each(std::string("no error")));
  if (had != nullptr) {
    setenv("DISTTEST_TIMEOUT", timeout.c_str(), 1);
  } else {
    unsetenv("DISTTEST_TIMEOUT");
  }
}

std::string LaunchErrorOf(const Config& config, int rank, int world, int port,
                          Backend backend = Backend::kGloo) {
  try {
    launch(config, rank, world, "127.0.0.1", port, backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LaunchTest, BadArgumentsFailBeforeAnyConnection) {
  const Config plain;
  EXPECT_EQ(LaunchErrorOf(plain, 3, 3, 1234),
            "launch: rank must be in [0, 2], got 3");
  EXPECT_EQ(LaunchErrorOf(plain, 0, 0, 1234),
            "launch: world_size must be in [1, 1024], got 0");
  EXPECT_EQ(LaunchErrorOf(plain, 0, 2, 0),
            "launch: port must be in [1, 65535], got 0");
  for (const int local_rank : {-5, 2}) {
    try {
      launch(plain, 0, 2, "127.0.0.1", 1234, Backend::kGloo, local_rank);
      ADD_FAILURE() << "local_rank " << local_rank << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.what(), "launch: local_rank must be in [0, 1], got " +
                              std::to_string(local_rank));
    }
  }
  Config tensor4;
  tensor4.parallel.tensor = 4;
  // Rank 1 would otherwise wait for a rank 0 that never comes.
  EXPECT_EQ(LaunchErrorOf(tensor4, 1, 6, 1234),
            "world size 6 does not split into pipeline 1 x tensor 4 (= 4)");
}

// Without NCCL in the build, or (with it) without a CUDA device.
TEST(LaunchTest, UnavailableBackendSaysSo) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  EXPECT_THAT(LaunchErrorOf(Config{}, 0, 1, FreePort(), Backend::kNccl),
              HasSubstr(NcclBuilt() ? "[rank 0/1] cannot create the nccl "
                                      "communicator on device 0: "
                                      "cudaSetDevice(0) failed"
                                    : "backend nccl is not available"));
}

TEST(LaunchTest, PortInUseSaysSo) {
  testing::LoopbackSocket taken(/*listen=*/true);
  ASSERT_NE(taken.port(), 0);
  EXPECT_THAT(LaunchErrorOf(Config{}, 0, 2, taken.port()),
              HasSubstr("Address already in use"));
}

TEST(LaunchTest, FromEnvReadsTheLauncher) {
  const int port = FreePort();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  Context ctx = launch_from_env(Config{}, Backend::kGloo, 7);
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_EQ(ctx.seed(), 7u);
  EXPECT_EQ(ctx.group(ParallelMode::kData).size(), 1);
  EXPECT_THAT([&] { ctx.group(static_cast<ParallelMode>(9)); },
              ::testing::ThrowsMessage<ConfigError>(
                  HasSubstr("ParallelMode 9 is none of kGlobal")));
  for (const char* name :
       {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    unsetenv(name);
  }
}

// launch_from_env() asks every client of its store for the job's token
// (DISTTEST_STORE_TOKEN), as the launched harness does: one without it is
// refused.
TEST(LaunchTest, FromEnvGuardsTheStoreWithTheToken) {
  const int port = FreePort();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("DISTTEST_STORE_TOKEN", "launch-test-secret", 1);
  const LauncherEnv env = DetectLauncherEnv();
  {
    Context ctx = launch_from_env(Config{}, Backend::kGloo);
    TcpStore outsider(env.master_addr, env.master_port,
                      std::chrono::seconds(10));
    EXPECT_THAT([&] { outsider.set("outside", std::string_view("x")); },
                ::testing::ThrowsMessage<StoreError>(
                    HasSubstr("closed the connection during set of key "
                              "'outside' (a store that requires a token")));
    TcpStore member(env.master_addr, env.master_port, std::chrono::seconds(10),
                    "launch-test-secret");
    EXPECT_NO_THROW(member.set("inside", std::string_view("x")));
  }
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "DISTTEST_STORE_TOKEN"}) {
    unsetenv(name);
  }
}

TEST(SelectDeviceTest, LocalRankElseGlobalRankModuloDevices) {
  EXPECT_EQ(internal::SelectDevice(3, 11, 8), 3);
  EXPECT_EQ(internal::SelectDevice(std::nullopt, 11, 8), 3);
  EXPECT_EQ(internal::SelectDevice(std::nullopt, 5, 4), 1);
  EXPECT_EQ(internal::SelectDevice(2, 2, 0), -1);  // No device: Gloo.
}

// The harness: options().parallel gives every rank its groups through ctx().
class Parallel : public DistributedTest {
 protected:
  Parallel() {
    options().parallel = ParallelConfig{.tensor = 2, .pipeline = 2};
  }
};

DIST_TEST_F(Parallel, EachGroupSumsOnlyItsMembers, 4, 8) {
  EXPECT_THAT(CheckGroups(ctx()), ::testing::IsEmpty());
  EXPECT_EQ(ctx().rank(), rank());
  EXPECT_EQ(ctx().local_rank(), local_rank());
  EXPECT_EQ(ctx().size(ParallelMode::kData), world_size() / 4);
  EXPECT_EQ(ctx().size(ParallelMode::kZero1), world_size() / 4);
  // The harness's own communicator is the global group.
  EXPECT_EQ(&ctx().group(ParallelMode::kGlobal), &comm());
}

class Zero1 : public DistributedTest {
 protected:
  Zero1() {
    options().parallel = ParallelConfig{.zero1 = 2};
    options().launch = LaunchMode::kExec;
    options().seed = 99;
  }
};

DIST_TEST_F(Zero1, ChunksOfTheDataGroup, 4) {
  EXPECT_THAT(CheckGroups(ctx()), ::testing::IsEmpty());
  EXPECT_EQ(ctx().rank_in(ParallelMode::kZero1), rank() % 2);
  EXPECT_EQ(ctx().seed(), 99u);
}

class NoParallel : public DistributedTest {};

DIST_TEST_F(NoParallel, CtxSaysWhatItNeeds) {
  try {
    ctx();
    ADD_FAILURE() << "ctx() did not throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ctx() needs options().parallel"));
  }
}

}  // namespace
}  // namespace disttest
