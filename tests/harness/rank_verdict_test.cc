// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank_verdict.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace disttest::internal {
namespace {

constexpr RankVerdict kAll[] = {RankVerdict::kPassed, RankVerdict::kFailed,
                                RankVerdict::kSkipped};

TEST(RankVerdictTest, EachWordReadsBackAsItsVerdict) {
  std::set<std::string> words;
  for (RankVerdict v : kAll) {
    words.insert(NameOf(v));
    EXPECT_EQ(ParseRankVerdict(NameOf(v)), v) << NameOf(v);
  }
  EXPECT_EQ(words, (std::set<std::string>{"passed", "failed", "skipped"}));
}

TEST(RankVerdictTest, OtherTextIsNoVerdict) {
  for (const char* text : {"", "Passed", "pass", "skipped ", "1"}) {
    EXPECT_EQ(ParseRankVerdict(text), std::nullopt) << text;
  }
}

TEST(RankVerdictTest, ExitCodesAreTheHarnessOnes) {
  EXPECT_EQ(ExitCodeOf(RankVerdict::kPassed), kExitPassed);
  EXPECT_EQ(ExitCodeOf(RankVerdict::kFailed), kExitFailed);
  EXPECT_EQ(ExitCodeOf(RankVerdict::kSkipped), kExitSkipped);
  EXPECT_TRUE(Succeeded(RankVerdict::kPassed));
  EXPECT_TRUE(Succeeded(RankVerdict::kSkipped));
  EXPECT_FALSE(Succeeded(RankVerdict::kFailed));
}

}  // namespace
}  // namespace disttest::internal
