// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Sanitizer reports in ranks: sanitizer_child_ (built with ASan and UBSan
// that halts) and sanitizer_lsan_child_ (LeakSanitizer alone) each have a
// test where one rank leaks, reads freed memory or overflows an int. The
// verdict must fail that rank, and only it, with the report's headline, the
// line in the child's source and the report's first lines; the whole report
// is in that rank's output; the other ranks pass. Forked, re-executed and
// reused ranks alike.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "self/child_process.h"

namespace disttest::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct Mode {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;
};

// For ctest's names of the tests ("where GetParam() = fork").
void PrintTo(const Mode& mode, std::ostream* os) { *os << mode.name; }

class SanitizerTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (std::string(DISTTEST_SANITIZER_CHILD).empty()) {
      GTEST_SKIP() << "this build is ThreadSanitizer's: ASan cannot be "
                      "linked beside it";
    }
  }

  ChildRun Run(const char* binary, const std::string& test) {
    ChildRun run =
        RunChild({binary, "--gtest_filter=Sanitized*." + test + "/*"},
                 GetParam().env, std::chrono::seconds(120));
    EXPECT_TRUE(ShmLeftovers(run.pid).empty());
    EXPECT_TRUE(KillOrphans().empty());
    return run;
  }

  static std::string Where(const std::string& marker) {
    return fmt::format("sanitizer_child_.cc:{}",
                       LineIn(DISTTEST_SANITIZER_CHILD_SOURCE, marker));
  }
};

// Under LeakSanitizer a rank checks for leaks after its body: rank 2's leak
// fails rank 2, with the leak's line; the report is in rank 2's output.
void ExpectLeakOfRank2(const ChildRun& run, const std::string& where) {
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("[  FAILED  ] Sanitized.LeaksInRank2"));
  EXPECT_THAT(run.out,
              HasSubstr("[rank 2/4] LeakSanitizer: detected memory leaks, at " +
                        where + "\n"))
      << run.out;
  EXPECT_THAT(run.out, HasSubstr("Direct leak of 40 byte(s) in 1 object(s)"));
  EXPECT_EQ(RanksNaming(run.out, "LeakSanitizer"), std::set<int>{2}) << run.out;
  // The whole report, in the rank's own output (its stderr, relayed).
  EXPECT_THAT(run.err, HasSubstr("ERROR: LeakSanitizer: detected memory leaks"))
      << run.err;
}

TEST_P(SanitizerTest, ALeakInARankFailsThatRank) {
  ExpectLeakOfRank2(Run(DISTTEST_SANITIZER_CHILD, "LeaksInRank2"),
                    Where("marker-leak"));
}

TEST_P(SanitizerTest, ALeakUnderStandaloneLeakSanitizerFailsThatRank) {
  if (std::string(DISTTEST_SANITIZER_LSAN_CHILD).empty()) {
    GTEST_SKIP() << "this build is ASan's: -fsanitize=leak alone cannot be "
                    "linked beside it";
  }
  ExpectLeakOfRank2(Run(DISTTEST_SANITIZER_LSAN_CHILD, "LeaksInRank2"),
                    Where("marker-leak"));
}

TEST_P(SanitizerTest, AnAddressSanitizerReportFailsThatRankWithItsHeadline) {
  const ChildRun run = Run(DISTTEST_SANITIZER_CHILD, "ReadsFreedMemoryInRank1");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out,
              HasSubstr("[rank 1/4] AddressSanitizer: heap-use-after-free on "
                        "address 0x"))
      << run.out;
  EXPECT_THAT(run.out, HasSubstr(", at " + Where("marker-use-after-free")));
  EXPECT_THAT(run.out, HasSubstr("SUMMARY: AddressSanitizer: "
                                 "heap-use-after-free"));
  // Its exit follows from the report: said with it, not as a second
  // failure, and not the bare status alone.
  EXPECT_THAT(run.out, HasSubstr("(the whole report is in the rank's output)\n"
                                 "  then the rank exited with status 1"));
  EXPECT_EQ(RanksNaming(run.out, "AddressSanitizer"), std::set<int>{1});
  EXPECT_THAT(run.out, Not(HasSubstr("Shadow bytes")));
  EXPECT_THAT(run.err, HasSubstr("Shadow bytes"));  // The whole report.
}

TEST_P(SanitizerTest, AnUndefinedBehaviorReportFailsThatRank) {
  const ChildRun run = Run(DISTTEST_SANITIZER_CHILD, "OverflowsInRank3");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out,
              HasSubstr("[rank 3/4] runtime error: signed integer overflow: "
                        "2147483647 + 1 cannot be represented in type 'int', "
                        "at " +
                        Where("marker-overflow")))
      << run.out;
  EXPECT_EQ(RanksNaming(run.out, "runtime error"), std::set<int>{3});
}

TEST_P(SanitizerTest, RanksThatLeakNothingPass) {
  const ChildRun run = Run(DISTTEST_SANITIZER_CHILD, "KeepsAndFreesMemory");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("Sanitizer")));
  if (!std::string(DISTTEST_SANITIZER_LSAN_CHILD).empty()) {
    const ChildRun lsan =
        Run(DISTTEST_SANITIZER_LSAN_CHILD, "KeepsAndFreesMemory");
    EXPECT_EQ(lsan.exit_code, 0) << lsan.out << lsan.err;
  }
}

// A rank that failed is not checked for leaks (run_rank.h): rank 2 fails
// with its own failure, not with the leak it also has.
TEST_P(SanitizerTest, ARankThatFailedIsNotCheckedForLeaks) {
  const ChildRun run = Run(DISTTEST_SANITIZER_CHILD, "LeaksAndFailsInRank2");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out,
              HasSubstr("[  FAILED  ] Sanitized.LeaksAndFailsInRank2"));
  EXPECT_THAT(run.out, HasSubstr("first failure, rank 2 after"));
  EXPECT_THAT(run.out, HasSubstr("rank 2 fails on purpose"));
  EXPECT_EQ(RanksNaming(run.out, ""), std::set<int>{2}) << run.out;
  EXPECT_THAT(run.out, Not(HasSubstr("LeakSanitizer"))) << run.out;
  EXPECT_THAT(run.err, Not(HasSubstr("LeakSanitizer"))) << run.err;
}

// A rank in its leak check is not stuck: when a peer fails meanwhile, the
// failure grace (1 ms here) waits for it, says so, and it passes.
TEST_P(SanitizerTest, ARankInItsLeakCheckIsNotEndedAfterAPeerFails) {
  for (const char* binary :
       {DISTTEST_SANITIZER_CHILD, DISTTEST_SANITIZER_LSAN_CHILD}) {
    if (std::string(binary).empty()) continue;
    SCOPED_TRACE(binary);
    const ChildRun run = Run(binary, "FailsInRank0WhileTheOthersCheckLeaks");
    EXPECT_NE(run.exit_code, 0) << run.out;
    // Ranks 1-3, or those of them still checking (one took 400 ms, another
    // 150 ms, in one run; rank 0 fails 2 ms after the last body's end).
    EXPECT_THAT(run.out, ContainsRegex("ranks? [1-3].* in LeakSanitizer's "
                                       "leak check after (its|their) body; "
                                       "the failure grace waits for"))
        << run.out;
    EXPECT_THAT(run.out, HasSubstr("first failure, rank 0 after"));
    EXPECT_THAT(run.out, HasSubstr("rank 0 fails on purpose"));
    // No verdict names any other rank: they passed.
    EXPECT_EQ(RanksNaming(run.out, ""), std::set<int>{0}) << run.out;
    EXPECT_THAT(run.out, Not(HasSubstr("killed by disttest"))) << run.out;
    EXPECT_THAT(run.out, Not(HasSubstr("stopped, not running"))) << run.out;
    EXPECT_THAT(run.out, HasSubstr("1 FAILED TEST")) << run.out;
  }
}

// ThreadSanitizer's reports in ranks (race_child_, built with it): the
// report is read from the runtime as it is made (race_report.h) and fails
// the rank whose access found it, naming both threads (by rank) and both
// stacks; the same report in the shared output is not a second failure.
class RaceTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(DISTTEST_RACE_CHILD).empty()) {
      GTEST_SKIP() << "this build is AddressSanitizer's: ThreadSanitizer "
                      "cannot be linked beside it";
    }
    if (!DISTTEST_TSAN_BUILD) {
      GTEST_SKIP() << "disttest is built without ThreadSanitizer here (the "
                      "race cases run in DISTTEST_SANITIZE=thread's build); "
                      "RefusedWhereDisttestIsNotBuiltWithIt runs instead";
    }
  }

  ChildRun Run(const std::string& test) {
    ChildRun run =
        RunChild({DISTTEST_RACE_CHILD, "--gtest_filter=Raced." + test + "*"},
                 {{"RACE_LAUNCH", GetParam()}}, std::chrono::seconds(120));
    EXPECT_TRUE(ShmLeftovers(run.pid).empty());
    EXPECT_TRUE(KillOrphans().empty());
    return run;
  }

  // "    #0 CountCall() race_child_.cc:21" (GCC's symbolizer leaves out
  // the "()"): the racing line, first in a stack.
  static std::string RacingFrame() {
    return fmt::format("    #0 CountCall(\\(\\))? race_child_\\.cc:{}\n",
                       LineIn(DISTTEST_RACE_CHILD_SOURCE, "marker-race"));
  }
};

// A program built with -fsanitize=thread against a disttest built without
// it (this build's race_child_): ThreadSanitizer would see none of
// disttest's synchronization and call what it orders races. Each test
// fails at once, saying so, before any rank starts.
TEST(RaceTestOutsideTsanBuild, RefusedWhereDisttestIsNotBuiltWithIt) {
  if (std::string(DISTTEST_RACE_CHILD).empty() || DISTTEST_TSAN_BUILD) {
    GTEST_SKIP() << "this build has no ThreadSanitizer program with a "
                    "disttest built without it";
  }
  const ChildRun run = RunChild(
      {DISTTEST_RACE_CHILD, "--gtest_filter=Raced.EachRankWritesItsOwn*"}, {},
      std::chrono::seconds(120));
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("this program runs under ThreadSanitizer, "
                                 "but disttest was built without it"))
      << run.out;
  EXPECT_THAT(run.out, HasSubstr("cmake -DDISTTEST_SANITIZE=thread"));
  EXPECT_THAT(run.out, HasSubstr("[  FAILED  ] Raced.EachRankWritesItsOwn"));
  EXPECT_THAT(run.out + run.err, Not(HasSubstr("[rank ")));  // None started.
  EXPECT_TRUE(ShmLeftovers(run.pid).empty());
  EXPECT_TRUE(KillOrphans().empty());
}

// Rank threads share a global that ranks as processes each had: every rank
// counts in it, and the race fails the test, naming the two ranks.
TEST_P(RaceTest, RankThreadsThatWriteOneGlobalFailNamingBothRanks) {
  if (std::string(GetParam()) == "fork") {
    const ChildRun run = Run("EveryRankCountsInOneGlobal");
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;  // Hidden: no race.
    EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 1 test."));
    return;
  }
  const ChildRun run = Run("EveryRankCountsInOneGlobal");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out,
              HasSubstr("[  FAILED  ] Raced.EveryRankCountsInOneGlobal"));
  const std::smatch m = [&] {
    std::smatch found;
    std::regex_search(
        run.out, found,
        std::regex(
            R"(\[rank ([0-3])/4\] ThreadSanitizer: data race on global )"
            R"('\(anonymous namespace\)::g_calls' \(4 bytes at 0x[0-9a-f]+\): )"
            R"(rank ([0-3]) and rank ([0-3])\n)"));
    return found;
  }();
  ASSERT_FALSE(m.empty()) << run.out;
  EXPECT_EQ(m[1], m[2]) << run.out;  // Told to the rank whose access found it.
  EXPECT_NE(m[2], m[3]) << run.out;
  // Both accesses are read-modify-writes: the one found may be either.
  EXPECT_THAT(run.out,
              ContainsRegex(fmt::format("rank {} (writes|reads) it:\n{}",
                                        m[2].str(), RacingFrame())));
  EXPECT_THAT(run.out, ContainsRegex(fmt::format(
                           "rank {} (wrote|read) it before, unordered with "
                           "that:\n{}",
                           m[3].str(), RacingFrame())));
  EXPECT_THAT(run.out, HasSubstr("The ranks are threads of one process here"));
  // The finder's failure; not rank 0's too for the same report in the
  // output (the output's reader would say the headline alone). TSan may
  // find the race twice (the read and the write of `g_calls + 1`): each is
  // its finder's.
  EXPECT_THAT(RanksNaming(run.out, "ThreadSanitizer"),
              ::testing::Contains(std::stoi(m[1])))
      << run.out;
  EXPECT_THAT(run.out, Not(ContainsRegex("ThreadSanitizer: data race\n")))
      << run.out;
  // TSan's own report, whole, in the output; its exit status (66) is not
  // a second failure.
  EXPECT_THAT(run.out + run.err,
              HasSubstr("WARNING: ThreadSanitizer: data race"));
  EXPECT_THAT(run.out, Not(HasSubstr("status 66"))) << run.out;
}

// A race between a rank's own threads fails that rank, as threads and as
// processes alike, whichever thread found it (the rank's, or the one it
// started: its name is the rank's, inherited).
TEST_P(RaceTest, ARanksOwnThreadsThatRaceFailThatRank) {
  for (const char* test : {"ARanksOwnThreadsRaceFoundByTheRank",
                           "ARanksOwnThreadsRaceFoundByItsThread"}) {
    SCOPED_TRACE(test);
    const ChildRun run = Run(test);
    EXPECT_NE(run.exit_code, 0) << run.out;
    EXPECT_THAT(run.out, HasSubstr("[rank 1/2] ThreadSanitizer: data race on "
                                   "global '(anonymous namespace)::g_calls'"))
        << run.out;
    EXPECT_THAT(run.out, ContainsRegex(RacingFrame()));
    EXPECT_THAT(run.out,
                Not(HasSubstr("The ranks are threads of one process")));
    EXPECT_EQ(RanksNaming(run.out, "ThreadSanitizer"), std::set<int>{1})
        << run.out;
    EXPECT_THAT(run.out, Not(HasSubstr("status 66"))) << run.out;
  }
}

// Ranks that write only their own element, then read the others' after a
// collective, are ordered by it: no report, the test passes.
TEST_P(RaceTest, RanksOrderedByCollectivesPass) {
  const ChildRun run = Run("EachRankWritesItsOwn");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 1 test."));
  EXPECT_THAT(run.out + run.err, Not(HasSubstr("ThreadSanitizer")));
}

INSTANTIATE_TEST_SUITE_P(LaunchModes, RaceTest,
                         ::testing::Values("threads", "fork"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(
    LaunchModes, SanitizerTest,
    ::testing::Values(Mode{"fork", {}},
                      Mode{"exec", {{"SANITIZER_LAUNCH", "exec"}}},
                      Mode{"pooled", {{"SANITIZER_POOLED", "1"}}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace disttest::testing
