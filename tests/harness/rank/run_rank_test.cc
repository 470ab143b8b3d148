// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RunRank's rules, in-process, over a host that records what the runtime
// asks of it: they hold for a spawned and a launched rank alike, since
// both run through RunRank.
#include "harness/rank/run_rank.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(std::vector<std::string>* log) : log_(log) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* backend_name() const override { return "fake"; }
  bool fail_barrier = false;
  // The barrier fails as the host arena's does when a peer ended.
  bool peer_ends_in_barrier = false;

 protected:
  void DoBarrier() override {
    log_->push_back("barrier");
    if (fail_barrier) throw CommError("[rank 0/2] barrier failed: peer gone");
    if (peer_ends_in_barrier) {
      throw CommError(
          std::string("[rank 0/2] barrier failed: ") +
          ErrorOfAPeer(
              "rank 1 ended while its peers waited for it in a collective")
              .what());
    }
  }
  void DoAllReduce(void*, std::size_t, DataType, ReduceOp) override {}
  void DoBroadcast(void*, std::size_t, DataType, int) override {}
  void DoAllGather(const void*, void*, std::size_t, DataType) override {}
  void DoSend(const void*, std::size_t, DataType, int, std::uint32_t) override {
  }
  void DoRecv(void*, std::size_t, DataType, int, std::uint32_t) override {}

 private:
  std::vector<std::string>* log_;
};

class NoStore : public Store {
 public:
  void set(std::string_view, const std::vector<char>&) override {}
  std::vector<char> get(std::string_view) override { return {}; }
  int64_t add(std::string_view, int64_t) override { return 0; }
  bool check(const std::vector<std::string>&) override { return true; }
  void wait(const std::vector<std::string>&) override {}
  bool remove(std::string_view) override { return false; }
};

class RecordingHost : public RankHost {
 public:
  RankEnv Enter() override {
    log.push_back("enter");
    if (!enter_error.empty()) throw ConfigError(enter_error);
    RankEnv env;
    env.world_size = 2;
    return env;
  }
  Store& store() override { return store_; }
  Communicator* Connect(const RankEnv&, const Options&,
                        std::chrono::milliseconds timeout) override {
    log.push_back("connect");
    connect_timeout = timeout;
    if (!connect_error.empty()) throw CommError(connect_error);
    return &comm;
  }
  // As both real hosts send it.
  void Report(const RankMessage& m) override {
    reported.push_back(MarkedIfItFollows(m));
  }
  RankVerdict Finish(RankVerdict verdict, Communicator* c) override {
    log.push_back(std::string("finish ") + NameOf(verdict));
    finished_with = c;
    return verdict;
  }

  std::vector<std::string> log;
  std::vector<RankMessage> reported;
  std::string enter_error;
  std::string connect_error;
  std::chrono::milliseconds connect_timeout{0};
  Communicator* finished_with = nullptr;
  RecordingCommunicator comm{&log};

 private:
  NoStore store_;
};

class RecordingProgram : public RankProgram {
 public:
  explicit RecordingProgram(std::vector<std::string>* log,
                            RankVerdict verdict = RankVerdict::kPassed)
      : log_(log), verdict_(verdict) {}
  RankVerdict Run(const RankEnv&, Communicator* comm, Store&,
                  const ReportFn& report) override {
    log_->push_back(comm != nullptr ? "program with comm" : "program");
    report({RankMessage::Kind::kNonFatalFailure, "t.cc", 3, "from the body"});
    return verdict_;
  }
  const char* file() const override { return "test.cc"; }
  int line() const override { return 42; }

 private:
  std::vector<std::string>* log_;
  RankVerdict verdict_;
};

Options WithTimeout(std::chrono::milliseconds timeout) {
  Options options;
  options.timeout = timeout;
  return options;
}

TEST(RunRankTest, ConnectsAndPassesABarrierBeforeTheBody) {
  RecordingHost host;
  RecordingProgram program(&host.log);
  EXPECT_EQ(RunRank(program, Options{}, host), RankVerdict::kPassed);
  EXPECT_THAT(host.log, ElementsAre("enter", "connect", "barrier",
                                    "program with comm", "finish passed"));
  EXPECT_EQ(host.finished_with, &host.comm);
  ASSERT_EQ(host.reported.size(), 1u);
  EXPECT_EQ(host.reported[0].message, "from the body");
}

TEST(RunRankTest, CollectivesGiveUpATenthBeforeTheTestsDeadline) {
  RecordingHost host;
  RecordingProgram program(&host.log);
  RunRank(program, WithTimeout(std::chrono::seconds(3)), host);
  EXPECT_EQ(host.connect_timeout, std::chrono::milliseconds(2700));
  RunRank(program, WithTimeout(std::chrono::seconds(300)), host);
  EXPECT_EQ(host.connect_timeout, std::chrono::milliseconds(295000));
}

TEST(RunRankTest, WithoutACommunicatorTheBodyRunsAlone) {
  RecordingHost host;
  RecordingProgram program(&host.log, RankVerdict::kSkipped);
  Options options;
  options.init_distributed = false;
  EXPECT_EQ(RunRank(program, options, host), RankVerdict::kSkipped);
  EXPECT_THAT(host.log, ElementsAre("enter", "program", "finish skipped"));
  EXPECT_EQ(host.finished_with, nullptr);
}

TEST(RunRankTest, AFailedSetUpIsTheRanksFatalFailureAtTheTest) {
  for (const char* where : {"enter", "connect", "barrier"}) {
    RecordingHost host;
    std::string cause = std::string("cause in ") + where;
    if (std::string(where) == "enter") host.enter_error = cause;
    if (std::string(where) == "connect") host.connect_error = cause;
    host.comm.fail_barrier = std::string(where) == "barrier";
    RecordingProgram program(&host.log);
    EXPECT_EQ(RunRank(program, Options{}, host), RankVerdict::kFailed) << where;
    EXPECT_EQ(host.log.back(), "finish failed") << where;
    EXPECT_THAT(
        host.log,
        ::testing::Not(::testing::Contains(::testing::StartsWith("program"))))
        << where;
    ASSERT_EQ(host.reported.size(), 1u) << where;
    const RankMessage& m = host.reported[0];
    EXPECT_EQ(m.kind, RankMessage::Kind::kFatalFailure);
    EXPECT_EQ(m.file, "test.cc");
    EXPECT_EQ(m.line, 42);
    EXPECT_THAT(m.message, HasSubstr("disttest could not set up the rank: "));
    EXPECT_THAT(m.message,
                HasSubstr(host.comm.fail_barrier ? "barrier failed" : cause));
  }
}

// A set-up that a peer broke (it ended while this rank waited in the first
// barrier) follows from that peer's failure, a value the host sends with
// it; what was noted before the rank's test (a forked rank inherits its
// parent's) is forgotten, so the same words of its own are its own.
TEST(RunRankTest, ASetUpAPeerBrokeFollowsFromItButNotWhatCameBefore) {
  RecordingHost broken;
  broken.comm.peer_ends_in_barrier = true;
  RecordingProgram program(&broken.log);
  EXPECT_EQ(RunRank(program, Options{}, broken), RankVerdict::kFailed);
  ASSERT_EQ(broken.reported.size(), 1u);
  EXPECT_THAT(broken.reported[0].message, HasSubstr("rank 1 ended while"));
  EXPECT_TRUE(broken.reported[0].follows);

  const std::string words =
      "rank 1 gave up waiting in the host arena (see its error)";
  (void)ErrorOfAPeer(words);  // Before this rank's test.
  RecordingHost own;
  own.connect_error = words;
  RecordingProgram second(&own.log);
  EXPECT_EQ(RunRank(second, Options{}, own), RankVerdict::kFailed);
  ASSERT_EQ(own.reported.size(), 1u);
  EXPECT_THAT(own.reported[0].message, HasSubstr(words));
  EXPECT_FALSE(own.reported[0].follows);
}

}  // namespace
}  // namespace disttest::internal
