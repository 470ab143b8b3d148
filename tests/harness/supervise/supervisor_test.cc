// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The supervisor's decisions, in-process: ranks are scripts of a fake
// spawner (fake_spawner.h), not processes, and everything else (the
// store, the result queues, the poll loop) is real.
#include "harness/supervise/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "env/internal_names.h"
#include "harness/fake_spawner.h"
#include "harness/report/verdict.h"

namespace disttest::internal {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using Script = FakeSpawner::Script;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kGrace{200};

TestSpec Spec(int world, milliseconds timeout = std::chrono::seconds(20)) {
  TestSpec spec;
  spec.name = "Fake.Test/" + std::to_string(world) + "ranks";
  spec.file = "fake_test.cc";
  spec.line = 7;
  spec.world_size = world;
  spec.options.timeout = timeout;
  spec.options.failure_grace = kGrace;
  spec.options.init_distributed = false;
  return spec;
}

Script Passes() {
  return {{{milliseconds(5), Done(RankVerdict::kPassed)}}, milliseconds(10), 0};
}
Script Fails() {
  return {{{milliseconds(5),
            {RankMessage::Kind::kNonFatalFailure, "body.cc", 3, "wrong"}},
           {milliseconds(5), Done(RankVerdict::kFailed)}},
          milliseconds(10),
          kExitFailed};
}
Script Skips() {
  return {{{milliseconds(5), Done(RankVerdict::kSkipped)}},
          milliseconds(10),
          kExitSkipped};
}
// A pooled rank: its verdict, and then it waits for the next test.
Script Parks(RankVerdict v) { return {{{milliseconds(5), Done(v)}}, {}, 0}; }

std::string Messages(const TestSpec& spec, const std::vector<RankReport>& r) {
  std::string all;
  for (const Finding& f : Judge(spec, r)) all += f.message + "\n";
  return all;
}

TEST(SupervisorTest, RanksThatPassEndTheTestAndNothingIsKilled) {
  const TestSpec spec = Spec(2);
  int stacks = 0;
  std::vector<RankReport> r =
      RunTest(spec, std::make_unique<FakeSpawner>(
                        std::vector<Script>{Passes(), Passes()}, &stacks));
  ASSERT_EQ(r.size(), 2u);
  for (const RankReport& rank : r) {
    EXPECT_EQ(rank.done, RankVerdict::kPassed);
    ASSERT_TRUE(rank.outcome.has_value());
    EXPECT_TRUE(rank.outcome->exited());
    EXPECT_EQ(rank.outcome->exit_code(), kExitPassed);
    EXPECT_EQ(rank.killed_because, "");
    EXPECT_EQ(rank.overran, "");
  }
  EXPECT_EQ(Messages(spec, r), "");
  EXPECT_EQ(stacks, 0);
}

TEST(SupervisorTest, AFailureGivesAStuckPeerTheGraceThenItsStackAndTheKill) {
  const TestSpec spec = Spec(2);
  const auto start = Clock::now();
  std::vector<RankReport> r =
      RunTest(spec, std::make_unique<FakeSpawner>(
                        std::vector<Script>{FakeSpawner::Hangs(), Fails()}));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, kGrace);
  EXPECT_LT(took, spec.options.timeout / 2);
  EXPECT_EQ(r[0].killed_because, "still running 200 ms after rank 1 failed");
  EXPECT_EQ(r[0].killed_for, RankReport::KilledFor::kPeersFailure);
  EXPECT_EQ(r[1].killed_for, RankReport::KilledFor::kItself);
  EXPECT_EQ(r[0].stack, "#0 stack of fake rank 0\n");
  EXPECT_EQ(r[0].overran, "");
  const std::string messages = Messages(spec, r);
  // The failure first, marked; the kill that followed from it after it.
  EXPECT_THAT(messages,
              ::testing::StartsWith("[rank 1/2] (first failure) wrong\n"));
  EXPECT_THAT(messages,
              HasSubstr("[rank 0/2] was killed by disttest: still running 200 "
                        "ms after rank 1 failed; it was here:\n#0 stack of "
                        "fake rank 0"));
}

// The first failure is streamed as it comes, in one line of at most 300
// characters: the whole message comes with the verdict.
TEST(SupervisorTest, TheFirstFailureIsStreamedAsOneShortLine) {
  const TestSpec spec = Spec(2);
  const std::string long_line(400, 'y');
  Script fails = {{{milliseconds(5),
                    {RankMessage::Kind::kNonFatalFailure, "body.cc", 3,
                     long_line + "\nthe second line"}},
                   {milliseconds(5), Done(RankVerdict::kFailed)}},
                  milliseconds(10),
                  kExitFailed};
  ::testing::internal::CaptureStdout();
  RunTest(spec, std::make_unique<FakeSpawner>(
                    std::vector<Script>{Passes(), std::move(fails)}));
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(out,
              ::testing::ContainsRegex(
                  "\\[ disttest \\] Fake.Test/2ranks: first failure, "
                  "rank 1 after [0-9]+ ms: at body.cc:3: y{286} \\.\\.\\.\n"))
      << out;
  EXPECT_THAT(out, Not(HasSubstr("the second line"))) << out;
  EXPECT_THAT(out, Not(HasSubstr(std::string(301, 'y')))) << out;
}

TEST(SupervisorTest, ASkipGivesPeersFiveTimesTheGrace) {
  const TestSpec spec = Spec(2);
  const auto start = Clock::now();
  std::vector<RankReport> r =
      RunTest(spec, std::make_unique<FakeSpawner>(
                        std::vector<Script>{Skips(), FakeSpawner::Hangs()}));
  EXPECT_GE(Clock::now() - start, 5 * kGrace);
  EXPECT_EQ(r[1].killed_because, "still running 1000 ms after rank 0 skipped");
  EXPECT_EQ(r[1].killed_for, RankReport::KilledFor::kPeersFailure);
}

TEST(SupervisorTest, RanksStillRunningAtTheTimeoutHaveOverrunIt) {
  const TestSpec spec = Spec(3, milliseconds(300));
  int stacks = 0;
  std::vector<RankReport> r =
      RunTest(spec, std::make_unique<FakeSpawner>(
                        std::vector<Script>{FakeSpawner::Hangs(), Passes(),
                                            FakeSpawner::Hangs()},
                        &stacks));
  for (int q : {0, 2}) {
    EXPECT_EQ(r[q].overran, "the test timed out after 300 ms") << q;
    EXPECT_EQ(r[q].killed_because, "the test timed out after 300 ms") << q;
  }
  EXPECT_EQ(r[1].overran, "");
  EXPECT_EQ(r[1].killed_because, "");
  EXPECT_EQ(stacks, 2);  // Not the rank that had finished.
}

TEST(SupervisorTest, ParkedRanksEndTheTestWithTheirVerdicts) {
  TestSpec spec = Spec(2);
  spec.child_env.emplace_back(env::kInternalPool, "1");
  RankGroup group(
      spec, std::make_unique<FakeSpawner>(std::vector<Script>{
                Parks(RankVerdict::kPassed), Parks(RankVerdict::kPassed)}));
  const auto start = Clock::now();
  {
    Supervisor supervisor(group);
    group.Start();
    supervisor.Run();
  }
  EXPECT_LT(Clock::now() - start, spec.options.timeout / 2);
  for (const RankGroup::Rank& rank : group.ranks()) {
    EXPECT_FALSE(rank.exited);  // Still there, waiting for the next test.
    EXPECT_EQ(rank.report.killed_because, "");
  }
  std::vector<RankReport> r = group.End("the pool was shut down");
  for (const RankReport& rank : r) EXPECT_TRUE(rank.killed_after_done);
  EXPECT_EQ(Messages(spec, r), "");
}

TEST(SupervisorTest, AParkedRanksFailureStartsTheGraceItsExitWould) {
  TestSpec spec = Spec(2);
  spec.child_env.emplace_back(env::kInternalPool, "1");
  RankGroup group(spec,
                  std::make_unique<FakeSpawner>(std::vector<Script>{
                      FakeSpawner::Hangs(), Parks(RankVerdict::kFailed)}));
  {
    Supervisor supervisor(group);
    group.Start();
    supervisor.Run();
  }
  EXPECT_EQ(group.ranks()[0].report.killed_because,
            "still running 200 ms after rank 1 failed");
  // The grace's end ends every rank still there, the one that failed too:
  // it is judged by its verdict.
  EXPECT_TRUE(group.ranks()[1].report.killed_after_done);
  group.End("the test ended");
}

}  // namespace
}  // namespace disttest::internal
