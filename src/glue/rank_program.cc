// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "glue/rank_program.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest-spi.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "base/threads.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "comm/request_account.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "env/knobs.h"
#include "glue/current_communicator.h"
#include "harness/rank/run_rank.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/report/trace.h"
#include "harness/spec.h"
#include "launch/launch_internal.h"

namespace disttest::internal {
namespace {

// The properties recorded so far in the running test's gtest result.
std::map<std::string, std::string> Properties() {
  // Rank threads record into their process's one result, where whose a
  // property is cannot be told (and the others record meanwhile): the
  // process reports them once, after them (ReportThreadsProperties).
  if (ThreadsRank() >= 0) return {};
  std::map<std::string, std::string> found;
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return found;
  const ::testing::TestResult* result = info->result();
  for (int i = 0; i < result->test_property_count(); ++i) {
    const ::testing::TestProperty& p = result->GetTestProperty(i);
    found[p.key()] = p.value();
  }
  return found;
}

// Sends every gtest result of the rank to the parent as it happens, instead
// of recording it in the rank's (never reported) copy of the test.
class ChannelReporter : public ::testing::ScopedFakeTestPartResultReporter {
 public:
  // A rank that is a thread takes only its own thread's results (gtest
  // keeps a reporter per thread); a process's rank takes every thread's.
  // `after_the_test`: one that takes what comes once the rank's test has
  // ended, from a thread the test left running, until the process exits.
  ChannelReporter(const ReportFn& report, int rank, bool after_the_test = false)
      : ScopedFakeTestPartResultReporter(ThreadsRank() >= 0
                                             ? INTERCEPT_ONLY_CURRENT_THREAD
                                             : INTERCEPT_ALL_THREADS,
                                         &unused_),
        report_(report),
        rank_(rank),
        after_the_test_(after_the_test) {
    if (!after_the_test_) outer_ = Answer(this);
  }
  ~ChannelReporter() override {
    if (!after_the_test_) Answer(outer_);
  }
  ChannelReporter(const ChannelReporter&) = delete;
  ChannelReporter& operator=(const ChannelReporter&) = delete;

  // What the rank's test has reported so far, for HasFailure() and its kin
  // (gtest's own answer sees only what gtest recorded: none of this).
  static std::optional<RankResultSoFar> Answering() {
    if (ThreadsRank() >= 0) {
      if (t_answering_ == nullptr) return std::nullopt;
      return t_answering_->SoFar();
    }
    std::lock_guard<std::mutex> lock(AnsweringMutex());
    if (g_answering_ == nullptr) return std::nullopt;
    return g_answering_->SoFar();
  }

  void ReportTestPartResult(const ::testing::TestPartResult& r) override {
    // A death test's child (EXPECT_DEATH forked it from the rank) is not the
    // rank: gtest drops what it reports, and so does disttest.
    if (::testing::internal::InDeathTestChild()) return;
    std::lock_guard<std::mutex> lock(mu_);
    RankMessage m;
    m.file = r.file_name() != nullptr ? r.file_name() : "";
    m.line = r.line_number();
    m.message = r.message();
    if (after_the_test_) {
      m.message = fmt::format(
          "after this rank's test had ended, from a thread the test left "
          "running: {}",
          m.message);
    }
    if (r.skipped()) {
      m.kind = RankMessage::Kind::kSkip;
      skipped_ = true;
      skipped_answer_ = true;
    } else if (r.fatally_failed()) {
      m.kind = RankMessage::Kind::kFatalFailure;
      failed_ = fatal_ = true;
      fatal_answer_ = true;
      NoteSaid(m.message);
    } else if (r.nonfatally_failed()) {
      m.kind = RankMessage::Kind::kNonFatalFailure;
      failed_ = true;
      nonfatal_answer_ = true;
      NoteSaid(m.message);
    } else {
      return;  // SUCCEED() carries nothing the parent needs.
    }
    report_(m);
    // As gtest's own flag would in one process: the failing rank stops
    // where it failed (not the parent, which only re-raises it).
    if (r.failed() && GTEST_FLAG_GET(break_on_failure)) {
      StopAtFailureForDebugger(
          rank_, fmt::format("{}:{}",
                             std::filesystem::path(m.file).filename().string(),
                             m.line));
    }
  }

  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }
  bool stops_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return fatal_ || skipped_;
  }
  bool skipped() {
    std::lock_guard<std::mutex> lock(mu_);
    return skipped_;
  }

 private:
  // Without mu_, which a report holds while it is sent (up to the channel's
  // timeout) or while the rank waits for a debugger.
  RankResultSoFar SoFar() const {
    return {fatal_answer_.load(), nonfatal_answer_.load(),
            skipped_answer_.load()};
  }
  // Makes `reporter` the one that answers for the rank running here (a rank
  // thread's own, or its process's, for the process's every thread);
  // returns the one that answered before.
  static ChannelReporter* Answer(ChannelReporter* reporter) {
    if (ThreadsRank() >= 0) return std::exchange(t_answering_, reporter);
    std::lock_guard<std::mutex> lock(AnsweringMutex());
    return std::exchange(g_answering_, reporter);
  }
  static std::mutex& AnsweringMutex() {
    static std::mutex* const mu = new std::mutex;
    return *mu;
  }
  static inline ChannelReporter* g_answering_ = nullptr;
  static inline thread_local ChannelReporter* t_answering_ = nullptr;

  ::testing::TestPartResultArray unused_;
  const ReportFn report_;
  const int rank_;
  const bool after_the_test_;
  ChannelReporter* outer_ = nullptr;
  std::mutex mu_;
  bool failed_ = false;
  bool fatal_ = false;
  bool skipped_ = false;
  std::atomic<bool> fatal_answer_{false};
  std::atomic<bool> nonfatal_answer_{false};
  std::atomic<bool> skipped_answer_{false};
};

}  // namespace

std::map<std::string, std::string> RecordedProperties() { return Properties(); }

std::optional<RankResultSoFar> CurrentRankResultSoFar() {
  return ChannelReporter::Answering();
}

void ReportThreadsProperties(const std::map<std::string, std::string>& before,
                             const ReportFn& report) {
  for (const auto& [key, value] : Properties()) {
    auto it = before.find(key);
    if (it != before.end() && it->second == value) continue;
    report({RankMessage::Kind::kProperty, "", -1,
            std::string(1, kPropertyOfTheRanks) + key + std::string(1, '\0') +
                value});
  }
}

std::string CurrentTestName() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return fmt::format("{}.{}", info->test_suite_name(), info->name());
}

std::string CurrentTestParam() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return PrintedParam(info != nullptr ? info->value_param() : nullptr);
}

std::string PrintedParam(const char* printed) {
  if (printed == nullptr) return "";
  // What prints otherwise in each process for one value is not compared:
  // an object gtest prints as its bytes (a pointer among them), and an
  // address (0x55d0c2a8e010), which ASLR moves.
  if (std::strstr(printed, "-byte object <") != nullptr) return "";
  std::string text;
  for (const char* p = printed; *p != '\0';) {
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
        std::isxdigit(static_cast<unsigned char>(p[2]))) {
      text += "0x?";
      p += 2;
      while (std::isxdigit(static_cast<unsigned char>(*p))) ++p;
    } else {
      text += *p++;
    }
  }
  if (text.size() <= 4096) return text;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return fmt::format("fnv1a:{:016x}", h);
}

std::string Demangle(const char* name) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? demangled : name;
  std::free(demangled);
  return out;
}

RankVerdict GtestRankProgram::Run(const RankEnv& env, Communicator* comm,
                                  Store& store, const ReportFn& report) {
  pid_ = getpid();
  SetCurrentRank(env, comm);
  // What the process held before this test (a forked rank inherits the
  // parent's account, where a plain TEST may have left something) is not
  // this test's.
  TakeRequestProblems(/*ended=*/true);
  const std::map<std::string, std::string> properties_before = Properties();
  // A spawned rank's process ends after its test (or, pooled, waits for
  // the next): what a thread the test left running reports meanwhile is
  // still the rank's failure, while the parent waits for it. Made first,
  // it takes over when the test's reporter goes; one for the process, never
  // destroyed (gtest calls a reporter after it lets go of its lock, and such
  // a thread may report at any time). Not where the ranks are threads (each
  // thread's reporter is its own), nor under a launcher (the process goes
  // on to gtest's next test).
  if (InSpawnedRank() && ThreadsRank() < 0) {
    static ChannelReporter* const after_the_test =
        new ChannelReporter(report, env.rank, true);
    (void)after_the_test;
  }
  std::optional<ChannelReporter> taking;
  ChannelReporter& reporter = taking.emplace(report, env.rank);
  for (const ::testing::TestPartResult& r : earlier_) {
    reporter.ReportTestPartResult(r);
  }
  // The harness's own keys live beside the user's; keep them apart.
  PrefixStore user_store("test", store);
  if (report_only_) {
    if (!reporter.stops_body()) {
      GTEST_MESSAGE_AT_(file(), line(),
                        "gtest ran no test body in this re-executed rank, "
                        "and recorded no failure or skip that says why",
                        ::testing::TestPartResult::kFatalFailure);
    }
  } else if (fixture_ != nullptr) {
    FixtureAccess::Bind(*fixture_, &env, comm, &user_store);
    EnterPhase(RankPhase::kBody);
    if (!reporter.stops_body()) {
      Guarded(fixture_->name() + "::Run()",
              [&] { FixtureAccess::Run(*fixture_); });
    }
    // What was bound lives in this frame; under an external launcher the
    // process goes on to the test.
    FixtureAccess::Bind(*fixture_, nullptr, nullptr, nullptr);
  } else {
    TestAccess::Bind(test_, &env, comm, &user_store);
    if (TestAccess::options(test_).parallel && comm != nullptr) {
      // With the test's deadline as the rank has it (DISTTEST_TIMEOUT and
      // the scale applied).
      Guarded("building the parallel groups (options().parallel)",
              [&] { Launch(env, *comm, store, EffectiveOptions(test_)); });
    }
    EnterPhase(RankPhase::kSetUp);
    // gtest runs TearDown() where it ran SetUp() (not after a fatal failure
    // or a skip in the constructor): so does the rank, on its own object, in
    // every mode. A re-executed rank's gtest ran SetUp() on its object.
    bool set_up = destroy_in_rank_;
    if (owned_ != nullptr && !reporter.stops_body()) {
      set_up = true;
      Guarded("SetUp()", [&] { TestAccess::SetUp(test_); });
    }
    // options() is read where the test is set up, before its ranks
    // start: one a rank changes has no effect, and a test that expects it
    // to (trial 13: a skip policy set in SetUpRank()) fails saying so.
    const Options as_started = TestAccess::options(test_);
    if (!reporter.stops_body()) {
      Guarded("SetUpRank()", [&] { TestAccess::SetUpRank(test_); });
    }
    if (!reporter.stops_body()) {
      EnterPhase(RankPhase::kBody);
      Guarded("the test body", [&] { TestAccess::Body(test_); });
    }
    EnterPhase(RankPhase::kTearDown);
    Guarded("TearDownRank()", [&] { TestAccess::TearDownRank(test_); });
    const std::vector<std::string> changed =
        ChangedOptions(as_started, TestAccess::options(test_));
    if (!changed.empty()) {
      const std::string message = fmt::format(
          "options().{} changed in a rank (in SetUpRank(), the body or "
          "TearDownRank()), where it has no effect: disttest reads options() "
          "where it sets the test up, before any rank starts; set {} in the "
          "fixture's constructor",
          fmt::join(changed, ", options()."),
          changed.size() == 1 ? "it" : "them");
      GTEST_MESSAGE_AT_(file(), line(), message.c_str(),
                        ::testing::TestPartResult::kNonFatalFailure);
    }
    if (set_up) {
      Guarded("TearDown()", [&] { TestAccess::TearDown(test_); });
    }
    TestAccess::BindContext(test_, nullptr);
    // gtest destroys the fixture after TearDown(): so does the rank, while
    // its results still reach the parent, whether it is pooled or fresh,
    // forked or re-executed; rank(), comm() and store() answer there as
    // in TearDownRank().
    if (owned_ != nullptr) {
      Guarded("the fixture's destructor", [&] { owned_.reset(); });
    } else if (destroy_in_rank_) {
      Guarded("the fixture's destructor", [&] { test_.~DistributedTest(); });
    } else {
      TestAccess::Bind(test_, nullptr, nullptr, nullptr);
    }
  }
  // Requests that failed where nothing could throw (destroyed without
  // wait()), and those still in flight now that the test is over, fail it
  // at the line that made them, whichever communicator they were on.
  for (const RequestProblem& p : TakeRequestProblems(/*ended=*/true)) {
    GTEST_MESSAGE_AT_(p.file.c_str(), static_cast<int>(p.line),
                      p.message.c_str(),
                      ::testing::TestPartResult::kNonFatalFailure);
  }
  // A call that did not match its peers' is a bug of the program (as is
  // each of BugOfTheProgram's, peer_errors.h): the
  // test fails with it even where it caught the error, and even where it
  // skipped afterwards. One that a failure already quotes (it left the
  // body, or the test reported it) is not said twice.
  for (const MismatchThrown& m : MismatchesNotSaid(reporter.failed())) {
    const std::string message = fmt::format(
        "the test caught disttest::CommError: {}\n{}, not of its "
        "environment: the test fails even though it caught the error",
        m.error, m.bug);
    GTEST_MESSAGE_AT_(m.file.empty() ? file() : m.file.c_str(),
                      m.file.empty() ? line() : static_cast<int>(m.line),
                      message.c_str(),
                      ::testing::TestPartResult::kNonFatalFailure);
  }
  const RankVerdict verdict = reporter.failed()    ? RankVerdict::kFailed
                              : reporter.skipped() ? RankVerdict::kSkipped
                                                   : RankVerdict::kPassed;
  // The test is over on this rank: what comes from here on is told as
  // coming after it.
  taking.reset();
  ClearCurrentRank();
  // What the rank recorded goes to the parent's XML (a pooled rank's
  // earlier tests recorded into the same gtest result: only what is new).
  for (const auto& [key, value] : Properties()) {
    auto it = properties_before.find(key);
    if (it != properties_before.end() && it->second == value) continue;
    report({RankMessage::Kind::kProperty, "", -1,
            key + std::string(1, '\0') + value});
  }
  return verdict;
}

std::unique_ptr<GtestRankProgram> GtestRankProgram::Own(
    const std::string& test) {
  auto it = TestFactories().find(test);
  std::function<DistributedTest*()> make =
      it != TestFactories().end() ? it->second : FindParamTestFactory(test);
  if (!make) return nullptr;
  // gtest makes a test object through statics (a parameterized test's
  // parameter is set in one before the object is made, which GetParam()
  // reads): rank threads make theirs one at a time (ThreadSanitizer found
  // them racing). A constructor has no communicator to wait on a peer
  // with; destructors, which might, are not serialized.
  static std::mutex* const one_at_a_time = new std::mutex;
  std::unique_lock<std::mutex> lock(*one_at_a_time, std::defer_lock);
  if (ThreadsRank() >= 0) lock.lock();
  // What the constructor reports (ADD_FAILURE, GTEST_SKIP) comes before any
  // reporter of the rank: kept, and reported when the program runs.
  ::testing::TestPartResultArray made;
  std::unique_ptr<DistributedTest> object;
  {
    ::testing::ScopedFakeTestPartResultReporter keep(
        ::testing::ScopedFakeTestPartResultReporter::
            INTERCEPT_ONLY_CURRENT_THREAD,
        &made);
    object.reset(make());
  }
  auto program = std::make_unique<GtestRankProgram>(std::move(object));
  std::vector<::testing::TestPartResult> earlier;
  for (int i = 0; i < made.size(); ++i)
    earlier.push_back(made.GetTestPartResult(i));
  program->ReportFirst(std::move(earlier));
  return program;
}

std::vector<::testing::TestPartResult> RecordedInThisRank() {
  std::vector<::testing::TestPartResult> found;
  auto add = [&](const ::testing::TestResult& result) {
    for (int i = 0; i < result.total_part_count(); ++i) {
      const ::testing::TestPartResult& r = result.GetTestPartResult(i);
      if (r.failed() || r.skipped()) found.push_back(r);
    }
  };
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  add(unit.ad_hoc_test_result());
  if (const ::testing::TestSuite* suite = unit.current_test_suite()) {
    add(suite->ad_hoc_test_result());
  }
  if (const ::testing::TestInfo* test = unit.current_test_info()) {
    add(*test->result());
  }
  return found;
}

std::unique_ptr<RankProgram> GtestRankProgram::Next(const std::string& test) {
  return Own(test);
}

// launch() on the test's store and communicator. A spawned rank _exits
// without destroying it (as with its communicator); under an external
// launcher it goes with the program, after the test.
void GtestRankProgram::Launch(const RankEnv& env, Communicator& comm,
                              Store& store, const Options& options) {
  LaunchRequest request;
  request.config.parallel = *options.parallel;
  request.rank = env.rank;
  request.world_size = env.world_size;
  request.local_rank = env.local_rank;
  request.local_size = env.local_size;
  request.backend = options.backend;
  request.seed = options.seed;
  request.bind_host = BindHostFor(env.master_addr);
  request.timeout = options.timeout;
  request.log = false;
  ctx_ = std::make_unique<Context>(LaunchOnStore(request, store, &comm));
  TestAccess::BindContext(test_, ctx_.get());
}

// An exception that escapes user code is a fatal failure of this rank,
// reported where the test is defined (the throw site is unknown).
template <typename F>
void GtestRankProgram::Guarded(const std::string& where, F&& f) {
  std::string message;
  try {
    f();
  } catch (const std::exception& e) {
    message = fmt::format("{} threw {}: {}", where, Demangle(typeid(e).name()),
                          e.what());
  } catch (...) {
    // Not a std::exception: its type is known all the same (trial 12:
    // `throw 42` read "of unknown type").
    const std::type_info* type = abi::__cxa_current_exception_type();
    message = type != nullptr
                  ? fmt::format("{} threw {} (not a std::exception)", where,
                                Demangle(type->name()))
                  : fmt::format("{} threw an exception of unknown type", where);
  }
  if (getpid() != pid_) {
    // A child of fork() in the test's code that came back here would run
    // the rest of the test as the rank, and its result would be taken for
    // the rank's (a pass, while the rank's own process exited mid-body).
    // The report goes through the rank's channel (shared memory), or is
    // lost where none is shared (a launched rank's: in its memory).
    const std::string forked = fmt::format(
        "a process forked in {} (pid {}; the rank's is {}) returned from it "
        "instead of ending: a child of fork() must end with _exit() or "
        "exec, or it goes on as the rank and its result is taken for the "
        "rank's; disttest ended it{}",
        where, getpid(), pid_,
        message.empty() ? std::string() : fmt::format(" ({})", message));
    GTEST_MESSAGE_AT_(file(), line(), forked.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
    _exit(1);
  }
  if (message.empty()) return;
  GTEST_MESSAGE_AT_(file(), line(), message.c_str(),
                    ::testing::TestPartResult::kFatalFailure);
}

void Reraise(const std::vector<Finding>& findings) {
  // The ranks' failures: the failing rank stopped for --gtest_break_on_failure
  // itself; the parent, which only reports them, does not break.
  const NoBreakOnFailure no_break;
  for (const Finding& f : findings) {
    switch (f.kind) {
      case Finding::Kind::kFailure:
        GTEST_MESSAGE_AT_(f.file.c_str(), f.line, f.message.c_str(),
                          ::testing::TestPartResult::kNonFatalFailure);
        break;
      case Finding::Kind::kFatalFailure:
        GTEST_MESSAGE_AT_(f.file.c_str(), f.line, f.message.c_str(),
                          ::testing::TestPartResult::kFatalFailure);
        break;
      case Finding::Kind::kSkip:
        GTEST_MESSAGE_AT_(f.file.c_str(), f.line, f.message.c_str(),
                          ::testing::TestPartResult::kSkip);
        break;
      case Finding::Kind::kNote:
        std::printf("[ disttest ] note: %s\n", f.message.c_str());
        break;
      case Finding::Kind::kProperty:
        ::testing::Test::RecordProperty(f.message, f.value);
        break;
    }
  }
}

std::string TraceOf(const TestSpec& spec,
                    const std::vector<RankReport>& ranks) {
  if (!TraceWanted()) return "";
  try {
    return WriteTrace(spec, ranks);
  } catch (const std::exception& e) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, e.what(),
                      ::testing::TestPartResult::kNonFatalFailure);
    return "";
  }
}

TestSpec SpecOf(const DistributedTest& test) {
  TestSpec spec;
  spec.name = CurrentTestName();
  if (const ::testing::TestInfo* info =
          ::testing::UnitTest::GetInstance()->current_test_info()) {
    spec.suite = info->test_suite_name();
  }
  spec.file = TestAccess::file(test);
  spec.line = TestAccess::line(test);
  spec.world_size = TestAccess::world_size(test);
  return spec;
}

std::vector<FixtureStep> FixtureSteps(DistributedTest& test) {
  std::vector<FixtureStep> steps;
  for (auto& fixture : FixtureAccess::fixtures(test)) {
    steps.push_back({fixture->name(), fixture->world_size()});
  }
  return steps;
}

void AdoptFixtureDirs(DistributedTest& test, const std::string& joined) {
  const std::vector<std::string> dirs = FixtureDirs::Split(joined);
  auto& fixtures = FixtureAccess::fixtures(test);
  for (std::size_t i = 0; i < fixtures.size() && i < dirs.size(); ++i) {
    FixtureAccess::SetDir(*fixtures[i], dirs[i]);
  }
}

const char* WhyNotThreads(const DistributedTest& test) {
  if (TestAccess::options(test).process_only) {
    return "its fixture is options().process_only";
  }
  if (!FixtureAccess::fixtures(const_cast<DistributedTest&>(test)).empty()) {
    return "it has DistributedFixtures";
  }
  // Each thread makes its own test object by the test's name.
  if (::testing::UnitTest::GetInstance()->current_test_info() == nullptr) {
    return nullptr;
  }
  const std::string name = CurrentTestName();
  try {
    if (TestFactories().count(name) != 0 || FindParamTestFactory(name)) {
      return nullptr;
    }
  } catch (const Error&) {
    // Parameters that print alike: which is this test's is unknown.
  }
  return "its test object cannot be made by its name in each thread "
         "(parameters that print alike?)";
}

// Options as the parent applies them: the fixture's, with environment
// overrides.
Options EffectiveOptions(const DistributedTest& test) {
  Options options = TestAccess::options(test);
  if (const char* mode = std::getenv(env::kLaunch);
      mode != nullptr && *mode != '\0') {
    const LaunchMode modes[] = {LaunchMode::kFork, LaunchMode::kExec,
                                LaunchMode::kThreads, LaunchMode::kMpiexec};
    const auto* it = std::find_if(
        std::begin(modes), std::end(modes),
        [&](LaunchMode m) { return std::string_view(mode) == Name(m); });
    if (it == std::end(modes)) {
      throw ConfigError(fmt::format(
          "environment variable {}='{}': expected fork, exec, threads or "
          "mpiexec (the launch mode of every test of the run)",
          env::kLaunch, mode));
    }
    options.launch = *it;
  }
  if (options.launch == LaunchMode::kThreads && WhyNotThreads(test)) {
    options.launch = LaunchMode::kFork;
  }
  // MPI's ranks are the processes of an MPI job: in a plain run, mpiexec
  // starts them (under mpirun the ranks are launched and this is unused).
  if (options.backend == Backend::kMpi) options.launch = LaunchMode::kMpiexec;
  if (auto timeout = SecondsVariable(env::kTimeout)) options.timeout = *timeout;
  // A timeout of milliseconds::max() (or a thousand years) means no limit:
  // cut to the longest deadline that can be added to a time point.
  options.timeout = std::min(options.timeout, kLongestTimeout);
  options.failure_grace = std::min(options.failure_grace, kLongestTimeout);
  // --gtest_break_on_failure: a failing rank waits for a debugger; nothing
  // times out meanwhile.
  if (GTEST_FLAG_GET(break_on_failure)) {
    options.timeout = options.failure_grace = std::chrono::hours(24);
  } else if (TimeoutScale() != 1) {
    // A slow build's deadlines (or DISTTEST_TIMEOUT_SCALE's), malformed
    // values named here.
    options.timeout = Scaled(options.timeout);
    options.failure_grace = Scaled(options.failure_grace);
  }
  // In a rank: the backend the parent chose (kAuto settled there).
  if (const char* backend = std::getenv(env::kInternalBackend)) {
    const std::string_view chosen = backend;
    options.backend = chosen == Name(Backend::kNccl)  ? Backend::kNccl
                      : chosen == Name(Backend::kMpi) ? Backend::kMpi
                                                      : Backend::kGloo;
  }
  if (options.parallel && !options.init_distributed) {
    throw ConfigError(
        "options().parallel needs options().init_distributed: the parallel "
        "groups are built on the test's communicator");
  }
  return options;
}

void RecordProperties(const TestSpec& spec) {
  ::testing::Test::RecordProperty("disttest_world_size", spec.world_size);
  ::testing::Test::RecordProperty("disttest_backend",
                                  Name(spec.options.backend));
  ::testing::Test::RecordProperty("disttest_launch", Name(spec.options.launch));
}

}  // namespace disttest::internal
