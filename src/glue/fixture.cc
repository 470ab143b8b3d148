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
#include <atomic>
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
#include "disttest/current_rank.h"
#include "disttest/distributed_test.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "glue/current_communicator.h"
#include "glue/launched.h"
#include "glue/rank_program.h"
#include "glue/spawned.h"
#include "harness/launched/launched_rank_host.h"
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

void RunExecRankWhoseBodyGtestSkipped(const std::string& test);

// In a re-executed rank gtest makes the test object and runs SetUp() itself:
// after a fatal failure or a skip there, it runs no body, and the rank, which
// starts in the body, would end without a word to its peers or its parent
// (a skip would then be a failure, a failure's message lost). At the end of
// the rank's test, it runs as the rank still, with what gtest recorded.
class RunsTheRankGtestDidNot : public ::testing::EmptyTestEventListener {
  // After a skip or a fatal failure in an Environment's SetUp(), gtest runs
  // no test at all in this process: the rank reports it now (a skip of
  // every rank's is the test's skip, as the parent's would have been).
  void OnEnvironmentsSetUpEnd(const ::testing::UnitTest&) override {
    const char* child = std::getenv(env::kInternalChildTest);
    if (child == nullptr || IsDeathTestChild() ||
        ::testing::internal::InDeathTestChild() ||
        !(::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure())) {
      return;
    }
    RunExecRankWhoseBodyGtestSkipped(child);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const char* child = std::getenv(env::kInternalChildTest);
    if (child == nullptr || IsDeathTestChild() ||
        ::testing::internal::InDeathTestChild() ||
        fmt::format("{}.{}", info.test_suite_name(), info.name()) != child) {
      return;
    }
    RunExecRankWhoseBodyGtestSkipped(child);
  }
};

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
  listeners.Append(new RunsTheRankGtestDidNot);
  return true;
}();

// Under ctest (disttest_discover_tests sets DISTTEST_SKIP_EXIT_CODE): a
// run whose every test skipped, and in which nothing failed (a global
// Environment neither), ends with that status, which ctest's
// SKIP_RETURN_CODE reads as a skip. It ends at gtest's last event, after
// its XML: code after RUN_ALL_TESTS() in the program's own main() does not
// run then. What fails later still ends the process with its own status (a
// static destructor's crash, LeakSanitizer's 23).
class SkipExitStatus : public ::testing::EmptyTestEventListener {
  void OnTestProgramEnd(const ::testing::UnitTest& unit_test) override {
    const char* text = std::getenv(env::kSkipExitCode);
    if (text == nullptr || *text == '\0') return;
    char* end = nullptr;
    errno = 0;
    const long code = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || code < 1 || code > 255) {
      std::fprintf(stderr,
                   "[ disttest ] %s=%s: expected a number from 1 to 255, the "
                   "exit status of a run whose every test skipped\n",
                   env::kSkipExitCode, text);
      std::fflush(nullptr);
      std::exit(1);
    }
    // Under a launcher rank 0 serves the store until every rank has said
    // goodbye, at this same event: the run ends as the launcher's.
    if (!unit_test.Passed() || unit_test.test_to_run_count() == 0 ||
        unit_test.skipped_test_count() != unit_test.test_to_run_count() ||
        LaunchedRun()) {
      return;
    }
    std::fflush(nullptr);
    std::exit(static_cast<int>(code));
  }
};

// Before gtest's own listeners that come later (its XML's): gtest tells the
// end of the program to the last added first, and this one last.
const bool kSkipExitStatusListened = [] {
  if (std::getenv(env::kInternalChildTest) != nullptr ||
      std::getenv(env::kSkipExitCode) == nullptr) {
    return false;
  }
  ::testing::UnitTest::GetInstance()->listeners().Append(new SkipExitStatus);
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

// A rank is a process of its own: one rank for all its threads. The info is
// written before `g_in_rank` says so and never while it does, so a thread
// that read true reads it whole.
RankInfo g_current_rank;
std::atomic<bool> g_in_rank{false};
// A rank that is a thread (LaunchMode::kThreads) has its own, in its thread.
thread_local RankInfo t_current_rank;
thread_local bool t_in_rank = false;

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

// gtest has destroyed its object (if it made one: not after a failed
// Environment or SetUpTestSuite()). The rank makes a stand-in for the test's
// options (its constructor runs once more; what it reports is dropped),
// none of whose code runs after it: the rank only reports what gtest
// recorded. gtest ran TearDown() and the destructor on its own object after
// SetUp(); TearDownRank() does not run, as no SetUpRank() did.
void RunExecRankWhoseBodyGtestSkipped(const std::string& test) {
  std::unique_ptr<GtestRankProgram> made;
  try {
    made = GtestRankProgram::Own(test);
  } catch (...) {
    return;  // The rank ends as it would have: its parent says how.
  }
  if (made == nullptr) return;
  DistributedTest& object = made->test();
  RunAsRank(object, ChildFixtureIndex(object), nullptr, /*forked=*/false,
            /*no_body=*/true);
}

}  // namespace

Communicator* CurrentCommunicatorOrNull() {
  const RankInfo* rank = CurrentRankOrNull();
  return rank != nullptr ? rank->comm : nullptr;
}

void SetCurrentRank(const RankEnv& env, Communicator* comm) {
  const RankInfo info{env.rank, env.world_size, env.local_rank, env.local_size,
                      comm};
  if (ThreadsRank() >= 0) {
    t_current_rank = info;
    t_in_rank = true;
    return;
  }
  g_in_rank.store(false, std::memory_order_release);
  g_current_rank = info;
  g_in_rank.store(true, std::memory_order_release);
}

void ClearCurrentRank() {
  if (ThreadsRank() >= 0) {
    t_in_rank = false;
    return;
  }
  g_in_rank.store(false, std::memory_order_release);
}

}  // namespace internal

const RankInfo* CurrentRankOrNull() {
  if (internal::t_in_rank) return &internal::t_current_rank;
  return internal::g_in_rank.load(std::memory_order_acquire)
             ? &internal::g_current_rank
             : nullptr;
}

const RankInfo& CurrentRank() {
  const RankInfo* rank = CurrentRankOrNull();
  if (rank == nullptr) {
    throw Error(
        "disttest::CurrentRank() was called outside a rank's test: it is set "
        "in a distributed test's SetUpRank(), body and TearDownRank() (and a "
        "DistributedFixture's Run()), in every launch mode and from every "
        "thread of the rank; CurrentRankOrNull() asks without throwing");
  }
  return *rank;
}

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
    const char* param = std::getenv(env::kInternalChildParam);
    if (param != nullptr && internal::CurrentTestParam() != param) {
      // Its object holds another parameter than the test process's (gtest
      // made it, and ran SetUp(), with it): it runs no more of the test, and
      // says why.
      const std::string why = fmt::format(
          "this re-executed rank's test parameter is {}, the test process's "
          "is {}: gtest made the parameters again in this process, and the "
          "generator gave other values (std::random_device, the time, a file "
          "that changed), or the value prints otherwise in each process (an "
          "address); make the generator give the same values in every "
          "process, give the type a PrintTo() that prints the value, or fork "
          "the ranks (options().launch = disttest::LaunchMode::kFork)",
          internal::CurrentTestParam(), param);
      GTEST_MESSAGE_AT_(file_, line_, why.c_str(),
                        ::testing::TestPartResult::kFatalFailure);
      internal::RunAsRank(*this, internal::ChildFixtureIndex(*this), nullptr,
                          /*forked=*/false, /*no_body=*/true);
    }
    internal::RunAsRank(*this, internal::ChildFixtureIndex(*this), nullptr,
                        /*forked=*/false);
  }
  // Another test the rank's filter matched ('?' stands for a ':', '-' or
  // '*' in its name, which gtest's filter cannot hold): not this rank's.
  if (internal::GtestFilterOf(running) == internal::GtestFilterOf(child)) {
    return;
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

namespace {

// A rank's answers to HasFailure() and its kin, or gtest's elsewhere (and
// in a rank's constructor, where no reporter of the rank answers yet).
// Under a launcher the process's gtest result is the rank's too (what its
// constructor and SetUp() recorded); in a spawned rank it is not (a forked
// one's is a copy of the parent's, a re-executed one's was replayed).
internal::RankResultSoFar RankAnswers() {
  const std::optional<internal::RankResultSoFar> so_far =
      internal::CurrentRankResultSoFar();
  internal::RankResultSoFar a = so_far.value_or(internal::RankResultSoFar{});
  if (!so_far || internal::LaunchedRun()) {
    a.fatal_failure = a.fatal_failure || ::testing::Test::HasFatalFailure();
    a.nonfatal_failure =
        a.nonfatal_failure || ::testing::Test::HasNonfatalFailure();
    a.skipped = a.skipped || ::testing::Test::IsSkipped();
  }
  return a;
}

}  // namespace

bool DistributedTest::HasFatalFailure() { return RankAnswers().fatal_failure; }
bool DistributedTest::HasNonfatalFailure() {
  return RankAnswers().nonfatal_failure;
}
bool DistributedTest::HasFailure() {
  const internal::RankResultSoFar a = RankAnswers();
  return a.fatal_failure || a.nonfatal_failure;
}
// As gtest's: skipped, and not failed.
bool DistributedTest::IsSkipped() {
  const internal::RankResultSoFar a = RankAnswers();
  return a.skipped && !a.fatal_failure && !a.nonfatal_failure;
}
bool DistributedFixture::HasFatalFailure() {
  return DistributedTest::HasFatalFailure();
}
bool DistributedFixture::HasNonfatalFailure() {
  return DistributedTest::HasNonfatalFailure();
}
bool DistributedFixture::HasFailure() { return DistributedTest::HasFailure(); }
bool DistributedFixture::IsSkipped() { return DistributedTest::IsSkipped(); }

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

namespace internal {
namespace {
thread_local int t_world_size_being_made = 0;
std::atomic<const ::testing::TestInfo*> g_last_made_for{nullptr};
}  // namespace

int WorldSizeBeingMade() { return t_world_size_being_made; }
MakingWorldSize::MakingWorldSize(int world_size)
    : before_(t_world_size_being_made) {
  t_world_size_being_made = world_size;
  g_last_made_for = ::testing::UnitTest::GetInstance()->current_test_info();
}
const ::testing::TestInfo* LastTestObjectMadeFor() { return g_last_made_for; }
MakingWorldSize::~MakingWorldSize() { t_world_size_being_made = before_; }
}  // namespace internal

namespace {

// The rank this object's code runs as where the object is not bound to it
// (its constructor, a re-executed or launched rank's SetUp(), which gtest
// runs, and its destructor): the rank of the thread or process, as the test
// bound it, as a launcher or disttest started the process, or as a rank
// thread is numbered. nullopt in the test process, and in a thread no rank
// runs.
std::optional<RankEnv> RankOfThisCode(int registered_world_size) {
  RankEnv env;
  if (const RankInfo* r = CurrentRankOrNull()) {
    env.rank = r->rank;
    env.world_size = r->world_size;
    env.local_rank = r->local_rank;
    env.local_size = r->local_size;
    return env;
  }
  if (internal::LaunchedRun()) {
    // Under a launcher each process is a rank of the whole job; those past
    // the test's size sit it out (rank() says -1 there).
    const LauncherEnv* job = internal::LaunchedEnvOrNull();
    if (job == nullptr || job->rank >= registered_world_size) {
      return std::nullopt;
    }
    return internal::launched::StepEnv(*job, registered_world_size);
  }
  if (internal::RanksAreThreads()) {
    if (internal::ThreadsRank() < 0) return std::nullopt;
    env.rank = env.local_rank = internal::ThreadsRank();
    env.world_size = env.local_size = registered_world_size;
    return env;
  }
  // A re-executed rank of a DistributedFixture runs the fixture, not this
  // test: its RANK and WORLD_SIZE are the fixture's.
  if (!InRank() || std::getenv(env::kInternalChildFixture) != nullptr) {
    return std::nullopt;
  }
  try {
    return RankEnv::FromEnvironment();
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

int DistributedTest::rank() const {
  if (rank_env_ != nullptr) return rank_env_->rank;
  const std::optional<RankEnv> env = RankOfThisCode(registered_world_size_);
  return env ? env->rank : -1;
}
int DistributedTest::world_size() const {
  if (rank_env_ != nullptr) return rank_env_->world_size;
  const std::optional<RankEnv> env = RankOfThisCode(registered_world_size_);
  return env ? env->world_size : registered_world_size_;
}
int DistributedTest::local_rank() const {
  if (rank_env_ != nullptr) return rank_env_->local_rank;
  const std::optional<RankEnv> env = RankOfThisCode(registered_world_size_);
  return env ? env->local_rank : -1;
}
int DistributedTest::local_size() const {
  if (rank_env_ != nullptr) return rank_env_->local_size;
  const std::optional<RankEnv> env = RankOfThisCode(registered_world_size_);
  return env ? env->local_size : registered_world_size_;
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
  if (control == nullptr && internal::ThreadsRank() >= 0) {
    throw Error(fmt::format(
        "{}() needs ranks that are processes: this test's ranks are threads "
        "of one process (LaunchMode::kThreads), and a thread cannot end or "
        "take a signal alone; mark the fixture options().process_only = true",
        what));
  }
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
