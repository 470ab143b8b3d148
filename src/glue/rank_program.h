// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What every way of running a DIST_TEST_F shares (spawned ranks, and a
// process started by an external launcher): the RankProgram that runs a
// test's or a fixture's code with every gtest result sent to a ReportFn,
// re-raising findings in the reporting process, and the fixtures'
// directories.
//
//   GtestRankProgram program(test, /*fixture=*/nullptr);
//   RankVerdict v = program.Run(env, comm, store, report);
//   Reraise(Judge(spec, reports));
#ifndef DISTTEST_SRC_GLUE_RANK_PROGRAM_H_
#define DISTTEST_SRC_GLUE_RANK_PROGRAM_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "disttest/distributed_test.h"
#include "harness/plan/step_plan.h"
#include "harness/rank/run_rank.h"
#include "harness/report/verdict.h"

namespace disttest::internal {

// The properties recorded so far in the running test's gtest result.
std::map<std::string, std::string> RecordedProperties();

// Ranks that are threads: the properties recorded since `before`, each
// once, through `report`, as the ranks' together (kPropertyOfTheRanks):
// they record into their process's one gtest result.
void ReportThreadsProperties(const std::map<std::string, std::string>& before,
                             const ReportFn& report);

// What the test running in this rank (this thread's, where ranks are
// threads) has reported so far; nullopt outside a rank's test. gtest's own
// HasFailure() sees none of it: the rank's results go to the parent.
struct RankResultSoFar {
  bool fatal_failure = false;
  bool nonfatal_failure = false;
  bool skipped = false;
};
std::optional<RankResultSoFar> CurrentRankResultSoFar();

// "Suite.Name/2ranks": the gtest test running now.
std::string CurrentTestName();
// The test that gtest made the last test object for, as it ran it (null
// before any): a test skipped without being run (--gtest_fail_fast) has
// none made.
const ::testing::TestInfo* LastTestObjectMadeFor();

// A test's parameter as gtest prints it (TestInfo::value_param(); "" for
// none), or its FNV-1a hash ("fnv1a:<hex>") past 4 KiB; the current test's.
// What prints otherwise in each process for one value is left out: an
// address is "0x?", an object printed as its bytes "" (not compared).
std::string PrintedParam(const char* value_param);
std::string CurrentTestParam();

// The demangled name of a type, as typeid(...).name() gives it.
std::string Demangle(const char* name);

// Runs the test's SetUpRank(), body and TearDownRank() in a rank (building
// options().parallel's groups first), or, when `fixture` is set, that
// fixture's Run(). Every gtest result goes to the ReportFn, not to gtest.
class GtestRankProgram : public RankProgram {
 public:
  GtestRankProgram(DistributedTest& test, DistributedFixture* fixture)
      : test_(test),
        fixture_(fixture),
        file_(TestAccess::file(test)),
        line_(TestAccess::line(test)) {}
  // A pooled rank's own test object: SetUp() and TearDown() run in the rank
  // too, around SetUpRank() and TearDownRank(), and it is destroyed after
  // them, in the rank, as gtest destroys a fixture.
  explicit GtestRankProgram(std::unique_ptr<DistributedTest> test)
      : test_(*test),
        fixture_(nullptr),
        file_(TestAccess::file(*test)),
        line_(TestAccess::line(*test)),
        owned_(std::move(test)) {}

  // A spawned rank that ends with its test (it _exits after Run) destroys
  // the test object after TearDownRank(), as gtest does after TearDown():
  // what its destructor does (a failure, a crash) is the rank's, in every
  // launch mode. The object is not used after Run().
  void DestroyTestInRank() { destroy_in_rank_ = true; }
  // A program of its own for `test` (by its full gtest name), as a pooled
  // rank's next test is; null when this binary has no such test. May throw
  // (a fixture's constructor, parameters that print alike).
  static std::unique_ptr<GtestRankProgram> Own(const std::string& test);
  // Failures and skips gtest recorded in this rank before its program ran,
  // which no reporter of the rank took: Run() reports them first, as the
  // rank's (a fatal failure or a skip stops the body). Own() keeps those of
  // the object's constructor; a re-executed rank takes RecordedInThisRank().
  void ReportFirst(std::vector<::testing::TestPartResult> results) {
    earlier_ = std::move(results);
  }

  // The test object it runs.
  DistributedTest& test() { return test_; }
  // Runs none of the test's code (a re-executed rank's test whose body gtest
  // did not run, on a stand-in object): Run() reports what came before
  // (ReportFirst), and a fatal failure if that does not say why.
  void ReportOnly() { report_only_ = true; }

  RankVerdict Run(const RankEnv& env, Communicator* comm, Store& store,
                  const ReportFn& report) override;
  const char* file() const override { return file_; }
  int line() const override { return line_; }
  std::unique_ptr<RankProgram> Next(const std::string& test) override;

 private:
  void Launch(const RankEnv& env, Communicator& comm, Store& store,
              const Options& options);
  // Runs `where`, the test's code: what it throws is a fatal failure. A
  // process that the code forked and that returns from it (where it
  // should have ended with _exit() or exec) fails the rank, saying so, and
  // ends there, before it could go on as the rank and report for it.
  template <typename F>
  void Guarded(const std::string& where, F&& f);

  DistributedTest& test_;
  DistributedFixture* fixture_;
  const char* file_;  // The test's, kept: the test may be destroyed.
  int line_;
  std::unique_ptr<DistributedTest> owned_;
  bool destroy_in_rank_ = false;
  bool report_only_ = false;
  pid_t pid_ = 0;                 // The rank's process, as Run() began.
  std::unique_ptr<Context> ctx_;  // options().parallel's groups.
  std::vector<::testing::TestPartResult> earlier_;
};

// The failures and skips gtest has recorded in this process so far outside
// any reporter of disttest: its Environments' SetUp(), the test suite's
// SetUpTestSuite(), and the running test's constructor and SetUp(). In a
// re-executed rank they are the rank's own (in a forked one, the parent's,
// which reports them itself).
std::vector<::testing::TestPartResult> RecordedInThisRank();

// The running test as the harness sees it: name, place, world size (its
// options are read by EffectiveOptions).
TestSpec SpecOf(const DistributedTest& test);

// The fixtures of `test`, as the plan sees them.
std::vector<FixtureStep> FixtureSteps(DistributedTest& test);

// Gives each fixture of `test` its directory from FixtureDirs::Joined()'s
// text (one per line, in declaration order).
void AdoptFixtureDirs(DistributedTest& test, const std::string& joined);

// Records each finding in the running gtest test, at its file:line.
void Reraise(const std::vector<Finding>& findings);

// With DISTTEST_TRACE, the test's trace, written; its path ("" without the
// variable, or when it could not be written: then a failure says why).
std::string TraceOf(const TestSpec& spec, const std::vector<RankReport>& ranks);

// While it lives, gtest's --gtest_break_on_failure is off in this process:
// for failures it reports for its ranks (the failing rank broke itself).
class NoBreakOnFailure {
 public:
  NoBreakOnFailure() : was_(GTEST_FLAG_GET(break_on_failure)) {
    GTEST_FLAG_SET(break_on_failure, false);
  }
  ~NoBreakOnFailure() { GTEST_FLAG_SET(break_on_failure, was_); }
  NoBreakOnFailure(const NoBreakOnFailure&) = delete;
  NoBreakOnFailure& operator=(const NoBreakOnFailure&) = delete;

 private:
  const bool was_;
};

// Options as they apply to this run: the fixture's, with environment
// overrides (DISTTEST_TIMEOUT, DISTTEST_LAUNCH); LaunchMode::kThreads
// becomes kFork where WhyNotThreads() says why.
Options EffectiveOptions(const DistributedTest& test);

// Why `test`'s ranks cannot be threads (its fixture is process_only, it
// has DistributedFixtures), or null.
const char* WhyNotThreads(const DistributedTest& test);

// The test's world size, backend and launch mode as XML properties.
void RecordProperties(const TestSpec& spec);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_RANK_PROGRAM_H_
