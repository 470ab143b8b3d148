// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// gtest's grammar: DIST_TEST_P and DIST_TYPED_TEST, in spawned and pooled
// ranks (verdicts.h).
#include "verdicts.h"

namespace disttest::testing {
namespace {

// A sweep is one gtest test per parameter and world size; a wrong result
// for one parameter at one size fails that test alone, and the filter and
// the rerun command pick it by its name.
TEST_P(VerdictsTest, ParameterizedTestIsOneTestPerParameterAndWorldSize) {
  Verdict v = Run("Counts/VerdictsSweep.*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 3 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] 1 test, listed below:\n"
                                   "[  FAILED  ] Counts/VerdictsSweep."
                                   "SumsTheParameter/3ranks/n5, where "
                                   "GetParam() = 5\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-sweep-fails", "[ranks 0-2 of 3]") +
                        "Expected: (sum) != (15), actual: 15 vs 15\n"
                        "marker-sweep-fails at 5\n"));
  // Every rank had the parameter.
  for (const std::string& line : {Out(0) + "marker-sweep 0 of 2: 1\n",
                                  Out(1) + "marker-sweep 1 of 2: 5\n",
                                  Out(2) + "marker-sweep 2 of 3: 1\n",
                                  Out(2) + "marker-sweep 2 of 3: 5\n"}) {
    EXPECT_THAT(v.run.out, HasSubstr(line));
  }
  EXPECT_THAT(v.run.out,
              HasSubstr("--gtest_filter=Counts/VerdictsSweep.SumsTheParameter/"
                        "3ranks/n5\n"));
  EXPECT_THAT(TestCaseXml(v.xml, "SumsTheParameter/3ranks/n5"),
              HasSubstr("value_param=\"5\""));
  // One test, by its name.
  Verdict one = Run("Counts/VerdictsSweep.SumsTheParameter/2ranks/n5");
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out;
  EXPECT_THAT(one.run.out, HasSubstr("[  PASSED  ] 1 test."));
  EXPECT_THAT(one.run.out, HasSubstr(Out(1) + "marker-sweep 1 of 2: 5\n"));
}

// Reused ranks make each parameter's test themselves, from its name.
TEST_P(VerdictsTest, PooledRanksRunEveryParameterOfASweep) {
  SKIP_FOR_THREADS(
      "rank threads are not pooled: a process of them is forked for each test");
  Verdict v = Run("Words/VerdictsPooledSweep.*");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  for (int r = 0; r < 2; ++r) {
    auto tests = PoolLines(v.run.out, r);
    ASSERT_EQ(tests.size(), 3u) << v.run.out;
    if (std::string(GetParam().launch) == "exec") continue;
    EXPECT_EQ(tests["Sweep_alpha"].second, 1);
    EXPECT_EQ(tests["Sweep_be"], std::make_pair(tests["Sweep_alpha"].first, 2));
    EXPECT_EQ(tests["Sweep_gamma"],
              std::make_pair(tests["Sweep_alpha"].first, 3));
  }
}

// Parameters that gtest prints alike cannot be told apart by a reused rank:
// the test it cannot make fails saying so (a fresh rank, forked with its
// own test object, runs it rightly).
TEST_P(VerdictsTest, PooledParametersThatPrintAlikeFailRatherThanRunTwice) {
  Verdict v = Run("Close/VerdictsPooledAlike.*");
  if (Threads()) {
    // No thread can make its own test object by name: the ranks are
    // processes, forked and then pooled as in fork mode.
    EXPECT_THAT(v.run.out,
                HasSubstr("runs its ranks as processes, not threads: its test "
                          "object cannot be made by its name in each thread"));
  }
  if (std::string(GetParam().launch) == "exec") {
    // kExec ranks are started for each test, each with its own parameter.
    EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
    return;
  }
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out,
              HasSubstr("a pooled rank could not start Close/"
                        "VerdictsPooledAlike.SeesItsParameter/2ranks/1: 2 "
                        "parameters of VerdictsPooledAlike.SeesItsParameter/"
                        "2ranks print as '1', so a reused rank cannot tell "
                        "which is Close/VerdictsPooledAlike.SeesItsParameter/"
                        "2ranks/1's"))
      << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("[       OK ] Close/VerdictsPooledAlike."
                                   "SeesItsParameter/2ranks/0"));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Close/VerdictsPooledAlike."
                                   "SeesItsParameter/2ranks/1"));
}

// A typed test is one suite per type, named by the suite's name generator;
// the failing type at the failing size fails alone.
TEST_P(VerdictsTest, TypedTestIsOneSuitePerType) {
  Verdict v = Run("VerdictsTyped/*");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  PASSED  ] 5 tests."));
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] 1 test, listed below:\n"
                                   "[  FAILED  ] VerdictsTyped/int32."
                                   "SumsInItsType/3ranks, where TypeParam = "
                                   "int\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-typed-fails", "[ranks 0-2 of 3]")));
  for (const char* type : {"float32", "float64"}) {
    EXPECT_THAT(
        v.run.out,
        HasSubstr(fmt::format(
            "[       OK ] VerdictsTyped/{}.SumsInItsType/3ranks", type)));
  }
  EXPECT_THAT(TestCaseXml(v.xml, "SumsInItsType/2ranks"),
              HasSubstr("type_param=\"int\""));
}

// A name with ':' or '-' (a typed test's generator's) would split gtest's
// filter or leave the test out: re-executed ranks ran no test ("exited with
// status 0 before the test body finished"), and the rerun line ran none.
TEST_P(VerdictsTest, NamesWithTheFiltersOwnCharactersRunAndRerun) {
  Verdict v = Run("VerdictsOddNames/*");
  EXPECT_EQ(v.run.exit_code, 1);
  for (const char* type : {"fp-32", "ns:int32"}) {
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("[  FAILED  ] VerdictsOddNames/"
                                      "{}.FailsOnRank1/2ranks",
                                      type)))
        << v.run.out;
  }
  EXPECT_EQ(
      Occurrences(v.run.out, FailureAt("marker-odd-name-fails", "[rank 1/2]")),
      2)
      << v.run.out;
  EXPECT_THAT(v.run.out, Not(HasSubstr("before the test body finished")));
  for (const char* type : {"fp?32", "ns?int32"}) {
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("'--gtest_filter=VerdictsOddNames/"
                                      "{}.FailsOnRank1/2ranks'",
                                      type)));
  }
}

}  // namespace
}  // namespace disttest::testing
