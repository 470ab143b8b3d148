// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "glue/spawned.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest-spi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <typeinfo>

#include "base/threads.h"
#include "comm/mpi_backend.h"
#include "disttest/distributed_test.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "glue/current_communicator.h"
#include "glue/launched.h"
#include "glue/mpiexec.h"
#include "glue/rank_program.h"
#include "harness/plan/gpu_placement.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/process/process_hygiene.h"
#include "harness/rank/pooled_rank.h"
#include "harness/rank/rank_control.h"
#include "harness/rank/run_rank.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/rank/thread_rank_host.h"
#include "harness/rank_outcome.h"
#include "harness/report/race_report.h"
#include "harness/report/verdict.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/supervise/supervisor.h"
#include "harness/supervise/worker_pool.h"

namespace disttest::internal {

// `fixture`: the index of the DistributedFixture this rank runs, or -1 for
// the test itself; `arena`: the host arena a forked rank inherited;
// `forked`: `test` is the parent's object (fork() copied it), not one made
// in this process.
//
// The test object's destructor runs in the rank after TearDownRank(), as
// gtest's runs after TearDown(), in every mode: a re-executed rank destroys
// the object gtest made in it; a forked rank makes its own (as gtest makes
// one per test, and as re-executed and pooled ranks do), so that its
// constructor and destructor run in pairs in the rank. Running the
// parent's object's destructor in every rank would undo what its
// constructor did in the parent (a directory made, a file written) once per
// rank. A test with DistributedFixtures (their directories are set on the
// parent's object), or whose object the rank cannot make (parameters that
// print alike), keeps the parent's, undestroyed in the rank.
namespace {

// A failure in a thread that is no rank's own (one a rank thread started):
// gtest gives it to the process's reporter, which is this one. It goes to
// rank 0, saying so: which rank started the thread is unknown.
class NoRanksThreadReporter
    : public ::testing::ScopedFakeTestPartResultReporter {
 public:
  NoRanksThreadReporter()
      : ScopedFakeTestPartResultReporter(INTERCEPT_ALL_THREADS, &unused_) {}
  void ReportTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed() && !r.skipped()) return;
    ReportForThreadRank(
        0, {r.skipped()          ? RankMessage::Kind::kSkip
            : r.fatally_failed() ? RankMessage::Kind::kFatalFailure
                                 : RankMessage::Kind::kNonFatalFailure,
            r.file_name() != nullptr ? r.file_name() : "", r.line_number(),
            fmt::format("in a thread that no rank runs (one a rank thread "
                        "started; which is unknown, so it is told to rank "
                        "0): {}",
                        r.message())});
  }

 private:
  ::testing::TestPartResultArray unused_;
};

// The ranks of `test` as threads of this process (a fork of the test
// process), each with a test object of its own, made in its thread.
[[noreturn]] void RunAsThreads(DistributedTest& test, const Options& options,
                               std::shared_ptr<HostArena> arena) {
  NoRanksThreadReporter no_ranks_threads;
  const std::string name = CurrentTestName();
  ProgramMaker make = [&name](int) -> std::unique_ptr<RankProgram> {
    return GtestRankProgram::Own(name);
  };
  const std::map<std::string, std::string> before = RecordedProperties();
  RunThreadRanks(make, options, std::move(arena), TestAccess::file(test),
                 TestAccess::line(test));
  ReportThreadsProperties(
      before, [](const RankMessage& m) { ReportForThreadRank(0, m); });
  LeaveThreadRanks();
}

}  // namespace

void RunAsRank(DistributedTest& test, int fixture,
               std::shared_ptr<HostArena> arena, bool forked, bool no_body) {
  const Options options = EffectiveOptions(test);
  if (options.launch == LaunchMode::kThreads && fixture < 0) {
    RunAsThreads(test, options, std::move(arena));
  }
  // A re-executed rank's gtest ran its Environments, SetUpTestSuite(), and
  // the test's constructor and SetUp(): what they reported is the rank's.
  std::vector<::testing::TestPartResult> earlier;
  if (!forked) earlier = RecordedInThisRank();
  auto& fixtures = FixtureAccess::fixtures(test);
  if (fixture >= 0) {
    GtestRankProgram program(test,
                             fixtures[static_cast<std::size_t>(fixture)].get());
    program.ReportFirst(std::move(earlier));
    if (no_body) program.ReportOnly();
    RunSpawnedRank(program, options, std::move(arena));
  }
  GtestRankProgram program(test, nullptr);
  program.ReportFirst(std::move(earlier));
  if (no_body) {
    program.ReportOnly();
  } else if (!forked) {
    program.DestroyTestInRank();
  }
  if (forked && fixtures.empty()) {
    // The rank's own test object is made here: its constructor is the
    // rank's (InRank() is true in it).
    BecomeRankProcess();
    // A pooled rank's threads that the constructor starts are the test's
    // (its communicator's, started after them, are not).
    const bool pooled = PooledRank();
    const std::vector<pid_t> threads =
        pooled ? ThreadIds() : std::vector<pid_t>{};
    std::unique_ptr<GtestRankProgram> own;
    try {
      own = GtestRankProgram::Own(CurrentTestName());
    } catch (const std::exception&) {
      // No object of its own can be made here (parameters that print
      // alike): the parent's, as it is.
    }
    if (pooled) NoteThreadsOfAConstructor(threads);
    if (own != nullptr) RunSpawnedRank(*own, options, std::move(arena));
  }
  RunSpawnedRank(program, options, std::move(arena));
}

namespace {

// Rank threads share one output, and one log (rank_group.cc).
bool IsThreadsLog(const RankReport& r) {
  return std::filesystem::path(r.log_path).filename() == "rank-threads.log";
}

std::string Whose(const RankReport& r) {
  return IsThreadsLog(r) ? std::string("the rank threads")
                         : fmt::format("rank {}", r.rank);
}

// DISTTEST_LOG_DIR: the end of each failing rank's log, where its last words
// are (output relayed live may be far above, or mixed with other ranks').
// Ranks that printed nothing are one line together, not one line each.
void PrintLogTails(const std::vector<RankReport>& ranks) {
  constexpr std::size_t kTailLines = 20;
  std::vector<int> silent;
  bool threads = false;  // Rank threads: one log, rank 0's report's.
  std::filesystem::path silent_dir;
  for (const RankReport& r : ranks) {
    if (r.log_path.empty() || !RankFailed(r)) continue;
    std::ifstream in(r.log_path);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(std::move(line));
      if (tail.size() > kTailLines) tail.pop_front();
    }
    if (tail.empty()) {
      threads = threads || IsThreadsLog(r);
      silent.push_back(r.rank);
      silent_dir = std::filesystem::path(r.log_path).parent_path();
      continue;
    }
    std::printf(
        "[ disttest ] the last %zu lines of %s's output (all of "
        "it: %s):\n",
        tail.size(), Whose(r).c_str(), r.log_path.c_str());
    for (const std::string& line : tail) std::printf("  %s\n", line.c_str());
  }
  if (!silent.empty()) {
    std::printf("[ disttest ] %s printed nothing (their logs: %s)\n",
                threads ? "the rank threads" : RanksText(silent).c_str(),
                silent_dir.c_str());
  }
  std::fflush(stdout);
}

// Once a run: what a rank that is a thread has not of its own; and, once
// for each reason, that a test asked for threads runs as processes.
void SayHowRanksRun(const DistributedTest& test, const Options& options) {
  const bool asked = TestAccess::options(test).launch == LaunchMode::kThreads ||
                     std::string_view(std::getenv(env::kLaunch) != nullptr
                                          ? std::getenv(env::kLaunch)
                                          : "") == Name(LaunchMode::kThreads);
  if (!asked) return;
  if (const char* why = WhyNotThreads(test)) {
    static std::set<std::string> said;
    if (said.insert(why).second) {
      std::printf(
          "[ disttest ] note: %s runs its ranks as processes, not threads: "
          "%s (so does every test like it)\n",
          CurrentTestName().c_str(), why);
      std::fflush(stdout);
    }
    return;
  }
  if (options.launch != LaunchMode::kThreads) return;
  static bool said = false;
  if (said) return;
  said = true;
  std::printf(
      "[ disttest ] ranks run as threads: one process per test, a thread per "
      "rank, each with its own fixture object. A rank thread has no "
      "environment of its own (no RANK, LOCAL_RANK or CUDA_VISIBLE_DEVICES: "
      "ask disttest::CurrentRank()), shares globals and statics (one RNG, "
      "one cache) with the other ranks, and shares signals, getpid(), the "
      "working directory and exit() with them; options().process_only runs "
      "a fixture as processes.\n");
  std::fflush(stdout);
}

// Whether the current test's parameter prints as its bytes, padding among
// them, which differ between copies of one value.
bool ParamPrintedAsBytes() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr && info->value_param() != nullptr &&
         std::strstr(info->value_param(), "-byte object <") != nullptr;
}

// Pooled ranks serve the tests of one run of one test suite (WorkerPools::
// EndOfSuite): in the process that runs the tests, not in a re-executed
// rank's.
class PoolsEndWithTheirSuite : public ::testing::EmptyTestEventListener {
  void OnTestSuiteEnd(const ::testing::TestSuite&) override {
    try {
      WorkerPools::Get().EndOfSuite();
    } catch (const std::exception& e) {
      // Not out of a listener (std::terminate): the ranks end with the
      // program all the same.
      std::fprintf(stderr, "[ disttest ] ending the suite's pooled ranks: %s\n",
                   e.what());
    }
  }
};
const bool kPoolsEndWithTheirSuite = [] {
  if (std::getenv(env::kInternalChildTest) != nullptr) return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new PoolsEndWithTheirSuite);
  return true;
}();

// Whether a test's ranks may come from a pool. When options().reuse_workers
// cannot apply, says why once per reason.
bool Pooled(DistributedTest& test, const TestSpec& spec) {
  if (!spec.options.reuse_workers) return false;
  if (SetToOne(env::kNoReuse)) return false;
  const char* why = spec.options.launch == LaunchMode::kExec
                        ? "LaunchMode::kExec starts ranks for each test"
                    : spec.options.launch == LaunchMode::kThreads
                        ? "LaunchMode::kThreads forks a process of rank "
                          "threads for each test"
                    : !FixtureAccess::fixtures(test).empty()
                        ? "a test with DistributedFixtures starts its ranks"
                    : spec.options.parallel
                        ? "a test with options().parallel starts its ranks"
                    : !spec.options.init_distributed
                        ? "a test without a communicator starts its ranks"
                    // Its bytes' padding differs between copies of it.
                    : ParamPrintedAsBytes()
                        ? "a test whose parameter gtest prints as its bytes "
                          "(a type without PrintTo()) cannot be found by it "
                          "in a reused rank"
                    // gtest would re-run the pool's first test in the child.
                    : GTEST_FLAG_GET(death_test_style) == "threadsafe"
                        ? "threadsafe death tests re-run a rank's test, "
                          "which must be the one the rank's process runs"
                        : nullptr;
  if (why == nullptr) return true;
  static std::set<std::string> said;
  if (said.insert(why).second) {
    std::printf("[ disttest ] options().reuse_workers is ignored here: %s\n",
                why);
    std::fflush(stdout);
  }
  return false;
}

// gtest's seed of this run's first shuffle: read at the first test that
// disttest runs (gtest takes the next seed at each repeat of the run).
int FirstShuffleSeed() {
  static const int seed = ::testing::UnitTest::GetInstance()->random_seed();
  return seed;
}

// Runs one distributed step of a test (a fixture, or the test itself) and
// re-raises its verdict; false when the test ends here (it failed or
// skipped).
bool RunStep(DistributedTest& test, const TestSpec& spec, int fixture) {
  // SIGTERM or SIGINT from here until the step's verdict is reported (the
  // supervisor's own guard ends with the ranks; re-raising 100,000
  // failures takes a second) is noted, not fatal: the report is finished,
  // then StopAfterInterrupt ends the run with gtest's files written.
  InterruptGuard interrupts;
  std::vector<RankReport> ranks;
  bool pooled = false;
  try {
    RankEntry entry = [&test, fixture](std::shared_ptr<HostArena> arena) {
      RunAsRank(test, fixture, std::move(arena), /*forked=*/true);
    };
    if (fixture < 0 && Pooled(test, spec)) {
      ranks = WorkerPools::Get().Run(spec, std::move(entry));
      pooled = true;
    } else {
      // Parked pools must not make this test fail for want of processes.
      WorkerPools::Get().MakeRoomForProcesses(spec.world_size);
      ranks = RunTest(spec, MakeSpawner(spec.options.launch, std::move(entry)));
    }
  } catch (const std::exception& e) {
    std::string message = spec.fixture.empty()
                              ? std::string(e.what())
                              : fmt::format("{}: {}", spec.fixture, e.what());
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, message.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
    return false;
  }
  Reraise(Judge(spec, ranks));
  const std::string trace = TraceOf(spec, ranks);
  if (pooled && ::testing::Test::HasFailure()) WorkerPools::Get().EndLast();
  if (::testing::Test::HasFailure()) {
    PrintLogTails(ranks);
    if (!trace.empty()) {
      std::printf(
          "[ disttest ] its timeline (Perfetto, chrome://tracing): %s\n",
          trace.c_str());
    }
    if (!spec.fixture.empty()) {
      std::printf(
          "[ disttest ] fixture %s failed, so the test's own ranks were not "
          "started\n",
          spec.fixture.c_str());
    }
    std::string rerun = RerunCommand(spec.name, spec.gpus.empty());
    if (!spec.gpus.empty()) {
      std::printf("[ disttest ] GPUs: %s\n", spec.gpus.c_str());
      rerun = fmt::format("{}={} {}", env::kGpus, spec.gpus_rerun, rerun);
    }
    ::testing::Test::RecordProperty("disttest_rerun", rerun);
    std::printf("[ disttest ] rerun this test alone: %s\n", rerun.c_str());
    const std::vector<std::string> before =
        pooled ? WorkerPools::Get().LastHistory() : std::vector<std::string>{};
    if (!before.empty()) {
      // A pooled rank's state may come from the tests before it.
      std::vector<std::string> all = before;
      all.push_back(spec.name);
      std::printf(
          "[ disttest ] this test ran on reused ranks "
          "(options().reuse_workers), after %zu other test%s on them: %s\n"
          "[ disttest ] rerun it on fresh ranks: %s=1 %s\n",
          before.size(), before.size() == 1 ? "" : "s",
          fmt::format("{}", fmt::join(before, ", ")).c_str(), env::kNoReuse,
          rerun.c_str());
      // gtest runs a filter's tests in the order they were registered: an
      // order shuffled (--gtest_shuffle) comes back only with the whole
      // run. (A pool serves one run of one suite: no test twice.)
      if (GTEST_FLAG_GET(shuffle)) {
        std::printf(
            "[ disttest ] rerun it after the same tests on the same ranks: "
            "they ran in a shuffled order, which no --gtest_filter gives; "
            "run it all again with the seed of the run's first shuffle: %s\n",
            RunAgainCommand(FirstShuffleSeed()).c_str());
      } else {
        std::printf(
            "[ disttest ] rerun it after the same tests on the same ranks: "
            "%s\n",
            RerunCommand(all, spec.gpus.empty()).c_str());
      }
    }
    std::fflush(stdout);
    return false;
  }
  return !::testing::Test::IsSkipped();
}

}  // namespace

namespace {

// ThreadSanitizer's reports made in the test's own process (not a rank's)
// since the last distributed test: a race in a plain TEST, or in disttest's
// supervision. A failure of this test, told as it ends.
struct TellRacesOfTheTestProcess {
  const TestSpec& spec;
  ~TellRacesOfTheTestProcess() {
    if (std::optional<std::string> races = RacesOfThisRank()) {
      const std::string text = fmt::format(
          "in the test's own process, not a rank's (since the last "
          "distributed test): {}",
          *races);
      GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, text.c_str(),
                        ::testing::TestPartResult::kNonFatalFailure);
    }
  }
};

}  // namespace

void Supervise(DistributedTest& test) {
  (void)FirstShuffleSeed();
  TestSpec spec = SpecOf(test);
  const TellRacesOfTheTestProcess races{spec};
  auto& fixtures = FixtureAccess::fixtures(test);
  FixtureDirs dirs;
  std::vector<TestSpec> steps;  // Each fixture, then the test itself.
  auto skip = [&](const std::string& why) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                      ::testing::TestPartResult::kSkip);
  };
  try {
    spec.options = EffectiveOptions(test);
    // The switches are read where they apply (some only in one mode): a
    // value that is neither 1 nor 0 fails every test, not only those.
    for (const char* name : {env::kNoReuse, env::kNoZygote, env::kNoKeeper,
                             env::kNoHostArena, env::kKeepNcclDebug}) {
      SetToOne(name);
    }
    if (std::string why = WhyNotUnderThisSanitizer(); !why.empty()) {
      throw Error(why);
    }
    SayHowRanksRun(test, spec.options);
    int most = spec.world_size;
    for (auto& fixture : fixtures) most = std::max(most, fixture->world_size());
    if (ListResources(spec.name, most, spec.options)) {
      return skip("listed for disttest_discover_tests; not run");
    }
    const int gpus_per_rank = ResolveBackend(spec.options, spec.world_size);
    RecordProperties(spec);
    if (std::string why = ParallelMisfit(spec); !why.empty()) return skip(why);
    if (spec.options.backend == Backend::kMpi && !MpiBackendLinked()) {
      throw Error(fmt::format("options().backend = Backend::kMpi: {}",
                              MpiBackendMissing()));
    }
    if (spec.options.launch == LaunchMode::kMpiexec) {
      return RunUnderMpiexec(spec);
    }
    for (auto& fixture : fixtures) {
      FixtureAccess::SetDir(*fixture, dirs.Create(fixture->name()));
    }
    if (!fixtures.empty()) {
      spec.child_env.emplace_back(env::kInternalFixtureDirs, dirs.Joined());
    }
    // A re-executed rank's gtest makes the test's parameters again: it
    // checks that they are this process's.
    if (spec.options.launch == LaunchMode::kExec) {
      if (std::string param = CurrentTestParam(); !param.empty()) {
        spec.child_env.emplace_back(env::kInternalChildParam, param);
      }
    }
    steps = PlanSteps(spec, FixtureSteps(test));
    if (std::string why = PlaceStepsOnGpus(steps, gpus_per_rank);
        !why.empty()) {
      if (!GpusRequired()) return skip(why);
      why += fmt::format(" ({}=1 makes this a failure)", env::kRequireGpus);
      GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                        ::testing::TestPartResult::kFatalFailure);
      return;
    }
    if (!steps.back().gpus.empty()) {
      ::testing::Test::RecordProperty("disttest_gpus", steps.back().gpus);
    }
  } catch (const std::exception& e) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, e.what(),
                      ::testing::TestPartResult::kFatalFailure);
    return;
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    int fixture = i + 1 < steps.size() ? static_cast<int>(i) : -1;
    const bool on = RunStep(test, steps[i], fixture);
    StopAfterInterrupt(steps[i], /*quiet=*/false, /*launched=*/false);
    // After a signal the next step is not started.
    if (!on || PendingInterrupt() != 0) return;
  }
}

}  // namespace disttest::internal
