// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/env/rank_env.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

#include "disttest/error.h"
#include "env/knobs.h"

namespace disttest {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// Sets variables for one test and restores them after.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class RankEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.Set("RANK", "1");
    env_.Set("WORLD_SIZE", "4");
    env_.Set("LOCAL_RANK", nullptr);
    env_.Set("LOCAL_SIZE", nullptr);
    env_.Set("LOCAL_WORLD_SIZE", nullptr);
    env_.Set("MASTER_ADDR", "127.0.0.1");
    env_.Set("MASTER_PORT", "29500");
  }
  std::string ErrorOf() {
    try {
      RankEnv::FromEnvironment();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }
  ScopedEnv env_;
};

TEST_F(RankEnvTest, ReadsTorchrunVariables) {
  env_.Set("LOCAL_RANK", "1");
  env_.Set("LOCAL_WORLD_SIZE", "2");
  RankEnv e = RankEnv::FromEnvironment();
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.Label(), "rank 1/4");
}

// torchrun's LOCAL_WORLD_SIZE first, as DetectLauncherEnv reads it, and an
// error names the variable it read (trial 11: "LOCAL_SIZE='abc'" for a
// LOCAL_WORLD_SIZE=abc, with LOCAL_SIZE unset).
TEST_F(RankEnvTest, LocalWorldSizeIsReadFirstAndNamedInItsError) {
  env_.Set("LOCAL_WORLD_SIZE", "2");
  env_.Set("LOCAL_SIZE", "4");
  EXPECT_EQ(RankEnv::FromEnvironment().local_size, 2);
  env_.Set("LOCAL_WORLD_SIZE", "abc");
  env_.Set("LOCAL_SIZE", nullptr);
  EXPECT_EQ(ErrorOf(),
            "environment variable LOCAL_WORLD_SIZE='abc' is not an integer");
}

TEST_F(RankEnvTest, LocalDefaultsToOneNode) {
  RankEnv e = RankEnv::FromEnvironment();
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
}

TEST_F(RankEnvTest, MalformedValuesAreNamedWithTheValue) {
  env_.Set("RANK", "x1");
  EXPECT_EQ(ErrorOf(), "environment variable RANK='x1' is not an integer");
  env_.Set("RANK", "4");
  EXPECT_EQ(ErrorOf(), "environment variable RANK=4 is out of range [0, 3]");
  env_.Set("RANK", "0");
  env_.Set("WORLD_SIZE", "0");
  EXPECT_EQ(ErrorOf(),
            "environment variable WORLD_SIZE=0 is out of range [1, 1024]");
  env_.Set("WORLD_SIZE", "99999999999999999999");
  EXPECT_THAT(ErrorOf(), HasSubstr("WORLD_SIZE='99999999999999999999' is not "
                                   "an integer"));
  env_.Set("WORLD_SIZE", "2");
  env_.Set("MASTER_PORT", "65536");
  EXPECT_THAT(ErrorOf(), HasSubstr("MASTER_PORT=65536 is out of range"));
  env_.Set("MASTER_PORT", "12 ");
  EXPECT_THAT(ErrorOf(), HasSubstr("MASTER_PORT='12 ' is not an integer"));
  // A space before is refused as one after (strtoll would skip it).
  env_.Set("MASTER_PORT", " 12");
  EXPECT_THAT(ErrorOf(), HasSubstr("MASTER_PORT=' 12' is not an integer"));
}

TEST_F(RankEnvTest, MissingVariableIsNamed) {
  env_.Set("MASTER_ADDR", nullptr);
  EXPECT_THAT(ErrorOf(),
              HasSubstr("environment variable MASTER_ADDR is not set"));
}

TEST_F(RankEnvTest, SecondsVariable) {
  env_.Set("DISTTEST_TIMEOUT", nullptr);
  EXPECT_FALSE(SecondsVariable("DISTTEST_TIMEOUT").has_value());
  env_.Set("DISTTEST_TIMEOUT", "2.5");
  EXPECT_EQ(SecondsVariable("DISTTEST_TIMEOUT"),
            std::chrono::milliseconds(2500));
  for (const char* bad :
       {"abc", "0", "-3", "1s", "nan", "inf", " 2", "2 ", "0x10", "0X1p4"}) {
    env_.Set("DISTTEST_TIMEOUT", bad);
    EXPECT_THROW(SecondsVariable("DISTTEST_TIMEOUT"), ConfigError) << bad;
  }
  // Too large is refused naming the bound; the bound itself is taken.
  for (const char* large : {"1e9", "1e999"}) {
    env_.Set("DISTTEST_TIMEOUT", large);
    try {
      SecondsVariable("DISTTEST_TIMEOUT");
      ADD_FAILURE() << large << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("environment variable DISTTEST_TIMEOUT='{}' is too "
                            "large: at most 10000000 seconds (about 115 days)",
                            large));
    }
  }
  env_.Set("DISTTEST_TIMEOUT", "1e7");
  EXPECT_EQ(SecondsVariable("DISTTEST_TIMEOUT"),
            std::chrono::milliseconds(10'000'000'000LL));
}

// 0 turns the heartbeat off however it is written (trial 11: "0.0" failed
// every test as "not a positive number of seconds").
TEST_F(RankEnvTest, HeartbeatIsOffAtZeroHoweverWritten) {
  for (const char* off : {"0", "0.0", "0e0", "-0"}) {
    env_.Set("DISTTEST_HEARTBEAT", off);
    EXPECT_EQ(HeartbeatInterval(), std::chrono::milliseconds(0)) << off;
  }
  env_.Set("DISTTEST_HEARTBEAT", "0.5");
  EXPECT_EQ(HeartbeatInterval(), std::chrono::milliseconds(500));
  env_.Set("DISTTEST_HEARTBEAT", nullptr);
  EXPECT_EQ(HeartbeatInterval(), std::chrono::seconds(5));
  for (const char* bad : {" 0", "0 ", "-1", "off", "0x0", "0x1"}) {
    env_.Set("DISTTEST_HEARTBEAT", bad);
    EXPECT_THROW(HeartbeatInterval(), ConfigError) << bad;
  }
  // A line at every turn of the parent's loop is no heartbeat (trial 13).
  env_.Set("DISTTEST_HEARTBEAT", "1e-9");
  EXPECT_THAT([] { HeartbeatInterval(); },
              ::testing::ThrowsMessage<ConfigError>(HasSubstr(
                  "DISTTEST_HEARTBEAT='1e-9' is too short: at least 0.1 "
                  "seconds between progress lines, or 0 to turn them off")));
  env_.Set("DISTTEST_HEARTBEAT", "0.1");
  EXPECT_EQ(HeartbeatInterval(), std::chrono::milliseconds(100));
}

TEST_F(RankEnvTest, ChildEnvironmentReplacesRankAndDropsParentOnlyVariables) {
  env_.Set("GTEST_TOTAL_SHARDS", "4");
  env_.Set("GTEST_SHARD_INDEX", "2");
  env_.Set("GTEST_OUTPUT", "xml:out.xml");
  env_.Set("NCCL_DEBUG", "INFO");
  env_.Set("DISTTEST_KEEP_NCCL_DEBUG", nullptr);
  env_.Set("SOMETHING_ELSE", "kept");
  RankEnv r;
  r.rank = 3;
  r.world_size = 4;
  r.local_rank = 3;
  r.local_size = 4;
  r.master_port = 1234;
  std::vector<std::string> child = ChildEnvironment(r, {{"EXTRA", "yes"}});
  EXPECT_THAT(child, Contains("RANK=3"));
  EXPECT_THAT(child, Not(Contains("RANK=1")));
  EXPECT_THAT(child, Contains("MASTER_PORT=1234"));
  EXPECT_THAT(child, Contains("LOCAL_SIZE=4"));
  EXPECT_THAT(child, Contains("EXTRA=yes"));
  EXPECT_THAT(child, Contains("SOMETHING_ELSE=kept"));
  for (const std::string& e : child) {
    EXPECT_THAT(e, Not(HasSubstr("GTEST_"))) << e;
    EXPECT_THAT(e, Not(HasSubstr("NCCL_DEBUG"))) << e;
  }
  env_.Set("DISTTEST_KEEP_NCCL_DEBUG", "1");
  EXPECT_THAT(ChildEnvironment(r, {}), Contains("NCCL_DEBUG=INFO"));
  // "0" is off, as for every switch (trial 11: it kept NCCL_DEBUG); a
  // value that is neither says so.
  env_.Set("DISTTEST_KEEP_NCCL_DEBUG", "0");
  EXPECT_THAT(ChildEnvironment(r, {}), Not(Contains("NCCL_DEBUG=INFO")));
  env_.Set("DISTTEST_KEEP_NCCL_DEBUG", "yes");
  EXPECT_THROW(ChildEnvironment(r, {}), ConfigError);
}

// What this build is, for the factor it must scale itself by.
double ThisBuildsScale() {
#if defined(__SANITIZE_THREAD__)
  return 5;
#elif defined(__SANITIZE_ADDRESS__)
  return 3;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return 5;
#elif __has_feature(address_sanitizer)
  return 3;
#else
  return 1;
#endif
#else
  return 1;
#endif
}

TEST_F(RankEnvTest, TimeoutScaleMultipliesDeadlines) {
  using std::chrono::milliseconds;
  env_.Set("DISTTEST_TIMEOUT_SCALE", "2.5");
  EXPECT_EQ(TimeoutScale(), 2.5);
  EXPECT_EQ(Scaled(milliseconds(3000)), milliseconds(7500));
  EXPECT_EQ(ScaleNote(), " (x2.5: DISTTEST_TIMEOUT_SCALE)");
  env_.Set("DISTTEST_TIMEOUT_SCALE", "0.5");
  EXPECT_EQ(Scaled(milliseconds(3001)), milliseconds(1501));
  env_.Set("DISTTEST_TIMEOUT_SCALE", "1");
  EXPECT_EQ(Scaled(milliseconds(3000)), milliseconds(3000));
  EXPECT_EQ(ScaleNote(), "");
}

TEST_F(RankEnvTest, TimeoutScaleOfASlowBuildIsItsOwn) {
  env_.Set("DISTTEST_TIMEOUT_SCALE", nullptr);
  env_.Set("LD_PRELOAD", nullptr);
  std::string tool;
  EXPECT_EQ(SlowBuildScale(&tool), ThisBuildsScale()) << tool;
  EXPECT_EQ(TimeoutScale(), ThisBuildsScale());
  if (ThisBuildsScale() != 1) {
    EXPECT_THAT(ScaleNote(),
                HasSubstr(" under " + tool +
                          "; set DISTTEST_TIMEOUT_SCALE to change it)"));
  } else {
    EXPECT_EQ(ScaleNote(), "");
  }
  env_.Set("DISTTEST_TIMEOUT_SCALE", "");
  EXPECT_EQ(TimeoutScale(), ThisBuildsScale());
}

TEST_F(RankEnvTest, MalformedTimeoutScaleIsNamed) {
  for (const char* bad :
       {"0", "-1", "fast", "2x", "101", "nan", "inf", "0x2"}) {
    env_.Set("DISTTEST_TIMEOUT_SCALE", bad);
    try {
      TimeoutScale();
      ADD_FAILURE() << bad << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr(fmt::format("DISTTEST_TIMEOUT_SCALE='{}' is "
                                        "invalid: it must be a number greater "
                                        "than 0 and at most 100",
                                        bad)));
    }
    // Deadlines inside disttest do not throw: the test's options say it.
    EXPECT_EQ(Scaled(std::chrono::milliseconds(10)).count(),
              10 * ThisBuildsScale());
  }
}

}  // namespace
}  // namespace disttest
