// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The gtest glue: DistributedTest::TestBody decides whether this process is
// the parent of a test (spawn, supervise, re-raise) or one of its ranks (run
// the body and report every result to the parent).
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

#include "disttest/distributed_test.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "glue/current_communicator.h"
#include "glue/launched.h"
#include "glue/rank_program.h"
#include "harness/plan/gpu_placement.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/process/process_hygiene.h"
#include "harness/rank/rank_control.h"
#include "harness/rank/run_rank.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/rank_outcome.h"
#include "harness/report/verdict.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/supervise/supervisor.h"
#include "harness/supervise/worker_pool.h"

namespace disttest {
namespace internal {
namespace {

// In a re-executed rank, results that gtest records outside the body (a
// failure or skip in the fixture's SetUp() or a global environment, which run
// again in the rank) would otherwise vanish with the printer: print them to
// stderr, which the parent relays with the rank's label.
class OutsideBodyResultPrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.type() == ::testing::TestPartResult::kSuccess) return;
    std::fprintf(stderr, "%s:%d: %s\n%s\n",
                 r.file_name() != nullptr ? r.file_name() : "unknown file",
                 r.line_number(), r.skipped() ? "Skipped" : "Failure",
                 r.message());
  }
};

// Before anything opens a descriptor: a closed stdout (`./tests >&-`) must
// not become the store's socket (process_hygiene.h).
const bool kStandardDescriptorsClaimed = [] {
  ClaimStandardDescriptors();
  return true;
}();

// In a re-executed rank, gtest's own printer would print the run's banner,
// "[ RUN ]" lines and a summary into the rank's output. It is replaced before
// main() runs, and stdout is made line-buffered before anything is written.
const bool kSilencedInExecRank = [] {
  if (std::getenv(env::kInternalChildTest) == nullptr) return false;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new OutsideBodyResultPrinter);
  return true;
}();

// After SIGTERM or SIGINT ended a test (interrupt.h): once gtest has
// written its XML and JSON, the process ends by that signal.
class EndByTheSignal : public ::testing::EmptyTestEventListener {
 public:
  // `finish`: this listener ends the process (a launched rank's goodbye
  // listener does instead, after the goodbye).
  explicit EndByTheSignal(bool finish) : finish_(finish) {}

 private:
  // gtest puts its flags back after each test: set here, after the test
  // that the signal ended, --gtest_fail_fast skips the rest.
  void OnTestEnd(const ::testing::TestInfo&) override {
    if (PendingInterrupt() != 0) GTEST_FLAG_SET(fail_fast, true);
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (finish_) FinishInterrupted();
  }
  bool finish_;
};

}  // namespace

// The test that a signal ended has failed with its report: gtest skips the
// rest (--gtest_fail_fast), writes its files, and the listener above ends
// the process.
void StopAfterInterrupt(const TestSpec& spec, bool quiet, bool launched) {
  const int sig = PendingInterrupt();
  if (sig == 0) return;
  static bool said = false;
  if (said) return;
  said = true;
  if (!::testing::Test::HasFailure()) {
    // Its ranks had finished when the signal came: it fails all the same,
    // so that gtest stops after it.
    const std::string why =
        fmt::format("disttest got {} while the test ran", InterruptText(sig));
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
  }
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new EndByTheSignal(/*finish=*/!launched));
  if (quiet) return;
  std::printf(
      "[ disttest ] %s ended %s with the report above; the tests after it "
      "are skipped, gtest writes its XML and JSON, and then this process "
      "ends by %s\n",
      InterruptText(sig).c_str(), spec.name.c_str(),
      sig == SIGINT    ? "SIGINT"
      : sig == SIGTERM ? "SIGTERM"
                       : "the signal");
  std::fflush(stdout);
}

namespace {

// A rank is a process of its own: one communicator for all its threads.
Communicator* g_current_comm = nullptr;

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
[[noreturn]] void RunAsRank(DistributedTest& test, int fixture,
                            std::shared_ptr<HostArena> arena, bool forked) {
  const Options options = EffectiveOptions(test);
  auto& fixtures = FixtureAccess::fixtures(test);
  if (fixture >= 0) {
    GtestRankProgram program(test,
                             fixtures[static_cast<std::size_t>(fixture)].get());
    RunSpawnedRank(program, options, std::move(arena));
  }
  GtestRankProgram program(test, nullptr);
  if (!forked) program.DestroyTestInRank();
  if (forked && fixtures.empty()) {
    std::unique_ptr<GtestRankProgram> own;
    try {
      own = GtestRankProgram::Own(CurrentTestName());
    } catch (const std::exception&) {
      // No object of its own can be made here (parameters that print
      // alike): the parent's, as it is.
    }
    if (own != nullptr) {
      own->TearDownInParentOnly();
      RunSpawnedRank(*own, options, std::move(arena));
    }
  }
  RunSpawnedRank(program, options, std::move(arena));
}

// The child of a "threadsafe" death test started by a rank (the binary
// re-executed, the rank's environment inherited): runs the body in place as
// that rank, up to the EXPECT_DEATH that gtest runs here. There are no peers
// in this process: comm() and store() say so.
void RunInDeathTestChild(DistributedTest& test) {
  RankEnv env;
  try {
    env = RankEnv::FromEnvironment();
  } catch (const std::exception& e) {
    GTEST_FAIL() << "a death test's child cannot read the rank environment: "
                 << e.what();
  }
  TestAccess::MarkDeathTestChild(test);
  TestAccess::Bind(test, &env, nullptr, nullptr);
  TestAccess::SetUpRank(test);
  if (!::testing::Test::HasFatalFailure()) TestAccess::Body(test);
  TestAccess::TearDownRank(test);
  TestAccess::Bind(test, nullptr, nullptr, nullptr);
}

// In a kExec rank: the directories the parent created, in declaration
// order (a forked rank inherited them with the fixture objects).
void AdoptFixtureDirsFromEnvironment(DistributedTest& test) {
  const char* joined = std::getenv(env::kInternalFixtureDirs);
  if (joined != nullptr) AdoptFixtureDirs(test, joined);
}

// DISTTEST_LOG_DIR: the end of each failing rank's log, where its last words
// are (output relayed live may be far above, or mixed with other ranks').
// Ranks that printed nothing are one line together, not one line each.
void PrintLogTails(const std::vector<RankReport>& ranks) {
  constexpr std::size_t kTailLines = 20;
  std::vector<int> silent;
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
      silent.push_back(r.rank);
      silent_dir = std::filesystem::path(r.log_path).parent_path();
      continue;
    }
    std::printf(
        "[ disttest ] the last %zu lines of rank %d's output (all of "
        "it: %s):\n",
        tail.size(), r.rank, r.log_path.c_str());
    for (const std::string& line : tail) std::printf("  %s\n", line.c_str());
  }
  if (!silent.empty()) {
    std::printf("[ disttest ] %s printed nothing (their logs: %s)\n",
                RanksText(silent).c_str(), silent_dir.c_str());
  }
  std::fflush(stdout);
}

// Whether a test's ranks may come from a pool. When options().reuse_workers
// cannot apply, says why once per reason.
bool Pooled(DistributedTest& test, const TestSpec& spec) {
  if (!spec.options.reuse_workers) return false;
  if (SetToOne(env::kNoReuse)) return false;
  const char* why = spec.options.launch != LaunchMode::kFork
                        ? "LaunchMode::kExec starts ranks for each test"
                    : !FixtureAccess::fixtures(test).empty()
                        ? "a test with DistributedFixtures starts its ranks"
                    : spec.options.parallel
                        ? "a test with options().parallel starts its ranks"
                    : !spec.options.init_distributed
                        ? "a test without a communicator starts its ranks"
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
          "[ disttest ] rerun it on fresh ranks: %s=1 %s\n"
          "[ disttest ] rerun it after the same tests on the same ranks: %s\n",
          before.size(), before.size() == 1 ? "" : "s",
          fmt::format("{}", fmt::join(before, ", ")).c_str(), env::kNoReuse,
          rerun.c_str(),
          RerunCommand(fmt::format("{}", fmt::join(all, ":")),
                       spec.gpus.empty())
              .c_str());
    }
    std::fflush(stdout);
    return false;
  }
  return !::testing::Test::IsSkipped();
}

void Supervise(DistributedTest& test) {
  TestSpec spec = SpecOf(test);
  auto& fixtures = FixtureAccess::fixtures(test);
  FixtureDirs dirs;
  std::vector<TestSpec> steps;  // Each fixture, then the test itself.
  auto skip = [&](const std::string& why) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                      ::testing::TestPartResult::kSkip);
  };
  try {
    spec.options = EffectiveOptions(test);
    int most = spec.world_size;
    for (auto& fixture : fixtures) most = std::max(most, fixture->world_size());
    if (ListResources(spec.name, most, spec.options)) {
      return skip("listed for disttest_discover_tests; not run");
    }
    const int gpus_per_rank = ResolveBackend(spec.options, spec.world_size);
    RecordProperties(spec);
    if (std::string why = ParallelMisfit(spec); !why.empty()) return skip(why);
    for (auto& fixture : fixtures) {
      FixtureAccess::SetDir(*fixture, dirs.Create(fixture->name()));
    }
    if (!fixtures.empty()) {
      spec.child_env.emplace_back(env::kInternalFixtureDirs, dirs.Joined());
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

// Which fixture a kExec rank runs (-1: the test); exits the process when
// the variable makes no sense.
int ChildFixtureIndex(DistributedTest& test) {
  const char* value = std::getenv(env::kInternalChildFixture);
  if (value == nullptr) return -1;
  int count = static_cast<int>(FixtureAccess::fixtures(test).size());
  try {
    return ParseIntVariable(env::kInternalChildFixture, value, 0, count - 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: %s (this test declares %d fixtures)\n",
                 e.what(), count);
    std::fflush(stderr);
    _exit(kExitHarnessError);
  }
}

}  // namespace

Communicator* CurrentCommunicatorOrNull() { return g_current_comm; }
void SetCurrentCommunicator(Communicator* comm) { g_current_comm = comm; }

}  // namespace internal

bool InRank() {
  // A re-executed rank, before its test starts (its Environments' SetUp()):
  // the variable it was started with.
  return internal::InSpawnedRank() ||
         std::getenv(env::kInternalChildTest) != nullptr;
}

void DistributedTest::TestBody() {
  if (!registration_error_.empty()) {
    GTEST_MESSAGE_AT_(file_, line_, registration_error_.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
    return;
  }
  if (internal::IsDeathTestChild()) return internal::RunInDeathTestChild(*this);
  const char* child = std::getenv(env::kInternalChildTest);
  if (child == nullptr) {
    if (internal::LaunchedRun()) return internal::RunLaunched(*this);
    return internal::Supervise(*this);
  }
  std::string running = internal::CurrentTestName();
  if (running == child) {
    internal::AdoptFixtureDirsFromEnvironment(*this);
    internal::RunAsRank(*this, internal::ChildFixtureIndex(*this), nullptr,
                        /*forked=*/false);
  }
  // A re-executed rank must run only its own test; spawning ranks of another
  // one from here would nest whole tests inside a rank.
  std::fprintf(stderr,
               "disttest: this process was started as a rank of %s, but gtest "
               "is running %s (does main() change --gtest_filter?)\n",
               child, running.c_str());
  std::fflush(stderr);
  _exit(internal::kExitHarnessError);
}

void DistributedTest::AddFixture(std::unique_ptr<DistributedFixture> fixture,
                                 const std::type_info& type) {
  std::string name = internal::Demangle(type.name());
  // A fixture in an anonymous namespace is still just "SavedShards".
  constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  for (std::size_t at; (at = name.find(kAnonymous)) != std::string::npos;) {
    name.erase(at, kAnonymous.size());
  }
  if (fixture->world_size() < 1 || fixture->world_size() > kMaxWorldSize) {
    throw ConfigError(fmt::format(
        "DistributedFixture {} has world size {}; it must be in [1, {}]", name,
        fixture->world_size(), kMaxWorldSize));
  }
  internal::FixtureAccess::SetName(*fixture, std::move(name));
  fixtures_.push_back(std::move(fixture));
}

int DistributedFixture::rank() const {
  return rank_env_ != nullptr ? rank_env_->rank : -1;
}

Store& DistributedFixture::store() {
  if (store_ == nullptr) {
    throw Error(fmt::format(
        "{}::store() is only available in the fixture's own ranks (in Run())",
        name_));
  }
  return *store_;
}

Communicator& DistributedFixture::comm() {
  if (comm_ == nullptr) {
    throw Error(fmt::format(
        "{}::comm() is only available in the fixture's own ranks (in Run()), "
        "and only when options().init_distributed is true",
        name_));
  }
  return *comm_;
}

int DistributedTest::rank() const {
  return rank_env_ != nullptr ? rank_env_->rank : -1;
}
int DistributedTest::world_size() const {
  return rank_env_ != nullptr ? rank_env_->world_size : registered_world_size_;
}
int DistributedTest::local_rank() const {
  return rank_env_ != nullptr ? rank_env_->local_rank : -1;
}
int DistributedTest::local_size() const {
  return rank_env_ != nullptr ? rank_env_->local_size : registered_world_size_;
}

namespace {

// The rank control of this rank; throws naming `what` where there is none.
internal::RankControl& ControlFor(const char* what, const RankEnv* env) {
  if (env == nullptr) {
    throw Error(fmt::format(
        "{}() is only available inside a rank (SetUpRank, the DIST_TEST_F "
        "body, TearDownRank)",
        what));
  }
  internal::RankControl* control = internal::CurrentRankControl();
  if (control == nullptr) {
    throw Error(fmt::format(
        "{}() needs ranks that disttest spawns itself: under an external "
        "launcher (mpirun, srun, torchrun) a rank's end is the launcher's to "
        "see, and a rank that dies ends the job",
        what));
  }
  return *control;
}

}  // namespace

void DistributedTest::ExpectRankToEnd(int rank, RankEnd end) {
  internal::ExpectedEnd expected;
  expected.signal = end.by_signal();
  expected.value = end.value();
  ControlFor("ExpectRankToEnd", rank_env_).Expect(rank, expected);
}

void DistributedTest::SignalRank(int rank, int signal) {
  ControlFor("SignalRank", rank_env_).Signal(rank, signal);
}

Context& DistributedTest::ctx() {
  if (ctx_ == nullptr) {
    throw Error(options_.parallel
                    ? "ctx() is only available inside a rank (SetUpRank, the "
                      "DIST_TEST_F body, TearDownRank)"
                    : "ctx() needs options().parallel: set it in the fixture's "
                      "constructor, e.g. options().parallel = "
                      "disttest::ParallelConfig{.tensor = 2}");
  }
  return *ctx_;
}

Store& DistributedTest::store() {
  if (death_test_child_) {
    throw Error(
        "store() is not available in the child of a death test (the "
        "\"threadsafe\" style re-runs the body up to the EXPECT_DEATH in a "
        "new process, without the rank's peers)");
  }
  if (store_ == nullptr) {
    throw Error(
        "store() is only available inside a rank (SetUpRank, the DIST_TEST_F "
        "body, TearDownRank)");
  }
  return *store_;
}

Communicator& DistributedTest::comm() {
  if (rank_env_ == nullptr) {
    throw Error(
        "comm() is only available inside a rank (SetUpRank, the DIST_TEST_F "
        "body, TearDownRank), not in the parent's constructor, SetUp or "
        "TearDown");
  }
  if (death_test_child_) {
    throw Error(
        "comm() is not available in the child of a death test (the "
        "\"threadsafe\" style re-runs the body up to the EXPECT_DEATH in a "
        "new process, without the rank's peers): put collectives after the "
        "EXPECT_DEATH, or use the \"fast\" style");
  }
  if (comm_ == nullptr) {
    throw Error(
        "comm() is not available: options().init_distributed is false for "
        "this test");
  }
  return *comm_;
}

}  // namespace disttest
