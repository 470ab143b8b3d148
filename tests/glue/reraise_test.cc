// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Reraise, in-process and gtest-spi style: each finding becomes the gtest
// result it stands for, at the rank's file:line, in the running test.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "glue/rank_program.h"

namespace disttest::internal {
namespace {

using ::testing::TestPartResult;

// The results Reraise(findings) records, captured instead of failing this
// test.
std::vector<TestPartResult> Captured(const std::vector<Finding>& findings) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::
            INTERCEPT_ONLY_CURRENT_THREAD,
        &results);
    Reraise(findings);
  }
  std::vector<TestPartResult> out;
  for (int i = 0; i < results.size(); ++i)
    out.push_back(results.GetTestPartResult(i));
  return out;
}

TEST(ReraiseTest, EachFindingIsItsResultAtTheRanksFileAndLine) {
  std::vector<TestPartResult> r = Captured({
      {Finding::Kind::kFailure, "body.cc", 12, "[rank 1/2] Expected 3", ""},
      {Finding::Kind::kFatalFailure, "body.cc", 20, "[rank 0/2] killed", ""},
      {Finding::Kind::kSkip, "skip.cc", 7, "all 2 ranks skipped: no GPU", ""},
  });
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].type(), TestPartResult::kNonFatalFailure);
  EXPECT_STREQ(r[0].file_name(), "body.cc");
  EXPECT_EQ(r[0].line_number(), 12);
  EXPECT_STREQ(r[0].message(), "[rank 1/2] Expected 3");
  EXPECT_EQ(r[1].type(), TestPartResult::kFatalFailure);
  EXPECT_EQ(r[1].line_number(), 20);
  EXPECT_EQ(r[2].type(), TestPartResult::kSkip);
  EXPECT_STREQ(r[2].file_name(), "skip.cc");
  EXPECT_STREQ(r[2].message(), "all 2 ranks skipped: no GPU");
}

TEST(ReraiseTest, AFailureFailsTheTestThatReraisesIt) {
  EXPECT_NONFATAL_FAILURE(Reraise({{Finding::Kind::kFailure, "body.cc", 3,
                                    "[rank 1/4] wrong", ""}}),
                          "[rank 1/4] wrong");
  EXPECT_FATAL_FAILURE(Reraise({{Finding::Kind::kFatalFailure, "body.cc", 4,
                                 "[rank 2/4] died", ""}}),
                       "[rank 2/4] died");
}

TEST(ReraiseTest, NotesAndPropertiesAreNoFailure) {
  std::vector<TestPartResult> r = Captured({
      {Finding::Kind::kNote, "", 0, "ended process 12 (sleep)", ""},
      {Finding::Kind::kProperty, "", 0, "rank1.answer", "42"},
  });
  EXPECT_TRUE(r.empty());
  const ::testing::TestResult* result =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  ASSERT_EQ(result->test_property_count(), 1);
  EXPECT_STREQ(result->GetTestProperty(0).key(), "rank1.answer");
  EXPECT_STREQ(result->GetTestProperty(0).value(), "42");
}

// A parameter as compared across processes: what prints otherwise in each
// for one value is left out (an address, which ASLR moves; an object
// printed as its bytes), the rest is kept; past 4 KiB, a hash.
TEST(PrintedParamTest, LeavesOutWhatPrintsOtherwiseInEachProcess) {
  EXPECT_EQ(PrintedParam(nullptr), "");
  EXPECT_EQ(PrintedParam("787"), "787");
  EXPECT_EQ(PrintedParam("(0x55e58cf06bf8, 3)"),
            PrintedParam("(0x562b123a1bf8, 3)"));
  EXPECT_EQ(PrintedParam("(0x55e58cf06bf8, 3)"), "(0x?, 3)");
  EXPECT_NE(PrintedParam("(0x55e58cf06bf8, 3)"),
            PrintedParam("(0x55e58cf06bf8, 4)"));
  EXPECT_EQ(PrintedParam("16-byte object <01-00 00-00 F8-6B F0-8C>"), "");
  const std::string long_a(5000, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';
  EXPECT_EQ(PrintedParam(long_a.c_str()).rfind("fnv1a:", 0), 0u);
  EXPECT_NE(PrintedParam(long_a.c_str()), PrintedParam(long_b.c_str()));
}

}  // namespace
}  // namespace disttest::internal
