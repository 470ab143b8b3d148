// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pooled ranks, both sides at once (worker_pool.h, pooled_rank.h): the
// parent's WorkerPools forks real ranks, whose entry is the spawned rank's
// own code (RunSpawnedRank) running a program that says which test it ran
// in which process. No gtest glue: the test names are the program's.
// Without a communicator the ranks have no host arena, so the next test's
// name goes through the store.
#include "harness/supervise/worker_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/threads.h"
#include "harness/rank/run_rank.h"
#include "harness/rank/spawned_rank_host.h"

namespace disttest::internal {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A rank's program: says "<test> in <pid>" (a property "ran"); rank 1 of a
// test named *.Fails* fails. Its next test is any named Pool.*; this binary
// "has no" other.
class PoolProgram : public RankProgram {
 public:
  explicit PoolProgram(std::string test) : test_(std::move(test)) {}

  RankVerdict Run(const RankEnv& env, Communicator* /*comm*/, Store& /*store*/,
                  const ReportFn& report) override {
    report({RankMessage::Kind::kProperty, "", -1,
            std::string("ran") + '\0' + test_ + " in " +
                std::to_string(getpid())});
    if (env.rank == 1 && test_.find(".Fails") != std::string::npos) {
      report({RankMessage::Kind::kNonFatalFailure, file(), 7, "rank 1 fails"});
      return RankVerdict::kFailed;
    }
    return RankVerdict::kPassed;
  }
  const char* file() const override { return "worker_pool_test.cc"; }
  int line() const override { return 5; }
  std::unique_ptr<RankProgram> Next(const std::string& test) override {
    if (test.rfind("Pool.", 0) != 0) return nullptr;
    return std::make_unique<PoolProgram>(test);
  }

 private:
  std::string test_;
};

Options PoolOptions() {
  Options options;
  options.init_distributed = false;
  options.reuse_workers = true;
  options.timeout = std::chrono::seconds(60);
  // A rank that passes is never ended for its peer's failure, however
  // late it reports on a loaded machine.
  options.failure_grace = std::chrono::seconds(30);
  return options;
}

TestSpec Spec(const std::string& name, int world) {
  TestSpec spec;
  spec.name = name;
  spec.file = "worker_pool_test.cc";
  spec.line = 5;
  spec.world_size = world;
  spec.options = PoolOptions();
  return spec;
}

// What a rank forked for `test` runs.
RankEntry Entry(const std::string& test) {
  return [test](std::shared_ptr<HostArena> arena) {
    PoolProgram program(test);
    RunSpawnedRank(program, PoolOptions(), std::move(arena));
  };
}

// A rank's "ran" property: "<test> in <pid>", or "" when none came.
std::string Ran(const RankReport& r) {
  for (const RankMessage& m : r.results) {
    if (m.kind == RankMessage::Kind::kProperty &&
        m.message.rfind(std::string("ran") + '\0', 0) == 0) {
      return m.message.substr(4);
    }
  }
  return "";
}

// The pid in a rank's "ran" property; -1 when none came.
pid_t PidOf(const RankReport& r) {
  const std::string ran = Ran(r);
  const std::size_t in = ran.rfind(" in ");
  return in == std::string::npos ? -1 : std::stoi(ran.substr(in + 4));
}

// Whether no process has this pid (the pool's rank was ended and reaped);
// false for no pid.
bool Gone(pid_t pid) { return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH; }

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The pools fork their ranks, which run the harness's code.
    ASSERT_EQ(ThreadCount(), 1u)
        << "these tests fork; the process must be single-threaded";
  }
  void TearDown() override { pools_.ShutdownAll(); }

  // Runs `name` on `world` ranks of the pools.
  std::vector<RankReport> Run(const std::string& name, int world) {
    return pools_.Run(Spec(name, world), Entry(name));
  }

  WorkerPools& pools_ = WorkerPools::Get();
};

TEST_F(WorkerPoolTest, AFinishedTestsRanksParkAndRunTheNextTestOfItsKind) {
  const std::vector<RankReport> first = Run("Pool.First/2ranks", 2);
  ASSERT_EQ(first.size(), 2u);
  for (const RankReport& r : first) {
    EXPECT_EQ(r.done, RankVerdict::kPassed) << r.rank;
    EXPECT_TRUE(r.parked) << r.rank;
    EXPECT_THAT(Ran(r), HasSubstr("Pool.First/2ranks in ")) << r.rank;
    EXPECT_FALSE(Gone(PidOf(r))) << "a parked rank is alive";
  }
  EXPECT_THAT(pools_.LastHistory(), IsEmpty());

  const std::vector<RankReport> second = Run("Pool.Second/2ranks", 2);
  ASSERT_EQ(second.size(), 2u);
  for (std::size_t r = 0; r < second.size(); ++r) {
    EXPECT_EQ(second[r].done, RankVerdict::kPassed) << r;
    EXPECT_TRUE(second[r].parked) << r;
    // The same process, handed the next test's name.
    EXPECT_EQ(Ran(second[r]),
              "Pool.Second/2ranks in " + std::to_string(PidOf(first[r])));
  }
  EXPECT_THAT(pools_.LastHistory(), ElementsAre("Pool.First/2ranks"));

  pools_.ShutdownAll();
  for (const RankReport& r : first) {
    EXPECT_TRUE(Gone(PidOf(r))) << "rank " << r.rank << " outlived its pool";
  }
}

TEST_F(WorkerPoolTest, AFailureEndsThePoolAndTheNextTestGetsFreshRanks) {
  const std::vector<RankReport> first = Run("Pool.First/2ranks", 2);
  ASSERT_EQ(first.size(), 2u);
  const std::vector<RankReport> fails = Run("Pool.Fails/2ranks", 2);
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_EQ(fails[0].done, RankVerdict::kPassed);
  EXPECT_EQ(fails[1].done, RankVerdict::kFailed);
  for (const RankReport& r : fails) {
    EXPECT_FALSE(r.parked) << r.rank;
    EXPECT_EQ(PidOf(r), PidOf(first[static_cast<std::size_t>(r.rank)]));
    EXPECT_TRUE(Gone(PidOf(r))) << "the pool's ranks were not ended";
  }

  const std::vector<RankReport> third = Run("Pool.Third/2ranks", 2);
  ASSERT_EQ(third.size(), 2u);
  for (std::size_t r = 0; r < third.size(); ++r) {
    EXPECT_EQ(third[r].done, RankVerdict::kPassed);
    EXPECT_THAT(Ran(third[r]), HasSubstr("Pool.Third/2ranks in "));
    EXPECT_NE(PidOf(third[r]), PidOf(first[r])) << "not a fresh rank";
  }
  EXPECT_THAT(pools_.LastHistory(), IsEmpty());
}

TEST_F(WorkerPoolTest, ATestOfAnotherKindGetsAPoolOfItsOwn) {
  const std::vector<RankReport> two = Run("Pool.First/2ranks", 2);
  ASSERT_EQ(two.size(), 2u);
  const std::vector<RankReport> three = Run("Pool.Other/3ranks", 3);
  ASSERT_EQ(three.size(), 3u);
  for (const RankReport& r : three) {
    EXPECT_EQ(r.done, RankVerdict::kPassed);
    EXPECT_NE(PidOf(r), PidOf(two[0]));
    EXPECT_NE(PidOf(r), PidOf(two[1]));
  }
  EXPECT_THAT(pools_.LastHistory(), IsEmpty());

  // The first pool is still there, parked.
  const std::vector<RankReport> again = Run("Pool.Second/2ranks", 2);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(PidOf(again[0]), PidOf(two[0]));
  EXPECT_EQ(PidOf(again[1]), PidOf(two[1]));
  EXPECT_THAT(pools_.LastHistory(), ElementsAre("Pool.First/2ranks"));

  pools_.ShutdownAll();
  for (const auto* reports : {&two, &three}) {
    for (const RankReport& r : *reports) EXPECT_TRUE(Gone(PidOf(r)));
  }
}

TEST_F(WorkerPoolTest, ATestTheRanksDoNotHaveFailsThemAndEndsThePool) {
  const std::vector<RankReport> first = Run("Pool.First/2ranks", 2);
  ASSERT_EQ(first.size(), 2u);
  const std::vector<RankReport> unknown = Run("Elsewhere.Test/2ranks", 2);
  ASSERT_EQ(unknown.size(), 2u);
  for (const RankReport& r : unknown) {
    EXPECT_EQ(r.done, RankVerdict::kFailed);
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].kind, RankMessage::Kind::kFatalFailure);
    EXPECT_EQ(r.results[0].message,
              "a pooled rank could not start Elsewhere.Test/2ranks: this "
              "binary has no distributed test Elsewhere.Test/2ranks");
    EXPECT_FALSE(r.parked);
  }
  for (const RankReport& r : first) EXPECT_TRUE(Gone(PidOf(r)));
}

}  // namespace
}  // namespace disttest::internal
