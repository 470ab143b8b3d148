// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The gtest glue: DistributedTest::TestBody decides whether this process is
// the parent of a test (spawn, supervise, re-raise) or one of its ranks (run
// the body and report every result to the parent).
#include "disttest/distributed_test.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <gtest/gtest-spi.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string_view>
#include <typeinfo>

#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "gtest/current_communicator.h"
#include "harness/launcher.h"
#include "harness/rank_main.h"
#include "harness/rank_outcome.h"
#include "harness/supervisor.h"
#include "harness/verdict.h"
#include "launch/launch_internal.h"

namespace disttest {
namespace internal {
namespace {

std::string CurrentTestName() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return fmt::format("{}.{}", info->test_suite_name(), info->name());
}

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

// A rank is a process of its own: one communicator for all its threads.
Communicator* g_current_comm = nullptr;

// Sends every gtest result of the rank to the parent as it happens, instead
// of recording it in the rank's (never reported) copy of the test.
class ChannelReporter : public ::testing::ScopedFakeTestPartResultReporter {
 public:
  explicit ChannelReporter(const ReportFn& report)
      : ScopedFakeTestPartResultReporter(INTERCEPT_ALL_THREADS, &unused_),
        report_(report) {}

  void ReportTestPartResult(const ::testing::TestPartResult& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    RankMessage m;
    m.file = r.file_name() != nullptr ? r.file_name() : "";
    m.line = r.line_number();
    m.message = r.message();
    if (r.skipped()) {
      m.kind = RankMessage::Kind::kSkip;
      skipped_ = true;
    } else if (r.fatally_failed()) {
      m.kind = RankMessage::Kind::kFatalFailure;
      failed_ = fatal_ = true;
    } else if (r.nonfatally_failed()) {
      m.kind = RankMessage::Kind::kNonFatalFailure;
      failed_ = true;
    } else {
      return;  // SUCCEED() carries nothing the parent needs.
    }
    report_(m);
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
  ::testing::TestPartResultArray unused_;
  const ReportFn& report_;
  std::mutex mu_;
  bool failed_ = false;
  bool fatal_ = false;
  bool skipped_ = false;
};

std::string Demangle(const char* name) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? demangled : name;
  std::free(demangled);
  return out;
}

// Runs the test's SetUpRank(), body and TearDownRank() in a rank, or, when
// `fixture` is set, that fixture's Run().
class GtestRankProgram : public RankProgram {
 public:
  GtestRankProgram(DistributedTest& test, DistributedFixture* fixture)
      : test_(test), fixture_(fixture) {}

  RankVerdict Run(const RankEnv& env, Communicator* comm, Store& store,
                  const ReportFn& report) override {
    SetCurrentCommunicator(comm);
    ChannelReporter reporter(report);
    // The harness's own keys live beside the user's; keep them apart.
    PrefixStore user_store("test", store);
    if (fixture_ != nullptr) {
      FixtureAccess::Bind(*fixture_, &env, comm, &user_store);
      Guarded(fixture_->name() + "::Run()",
              [&] { FixtureAccess::Run(*fixture_); });
    } else {
      TestAccess::Bind(test_, &env, comm, &user_store);
      const Options& options = TestAccess::options(test_);
      if (options.parallel && comm != nullptr) {
        Guarded("building the parallel groups (options().parallel)",
                [&] { Launch(env, *comm, store, options); });
      }
      if (!reporter.stops_body()) {
        Guarded("SetUpRank()", [&] { TestAccess::SetUpRank(test_); });
      }
      if (!reporter.stops_body()) {
        Guarded("the test body", [&] { TestAccess::Body(test_); });
      }
      Guarded("TearDownRank()", [&] { TestAccess::TearDownRank(test_); });
    }
    if (reporter.failed()) return RankVerdict::kFailed;
    return reporter.skipped() ? RankVerdict::kSkipped : RankVerdict::kPassed;
  }
  const char* file() const override { return TestAccess::file(test_); }
  int line() const override { return TestAccess::line(test_); }

 private:
  // launch() on the harness's store and communicator. The Context is never
  // destroyed: the rank _exits after the test, as with its communicator.
  void Launch(const RankEnv& env, Communicator& comm, Store& store,
              const Options& options) {
    LaunchRequest request;
    request.config.parallel = *options.parallel;
    request.rank = env.rank;
    request.world_size = env.world_size;
    request.local_rank = env.local_rank;
    request.local_size = env.local_size;
    request.backend = options.backend;
    request.seed = options.seed;
    request.bind_host = env.master_addr;
    request.timeout = options.timeout;
    request.log = false;
    auto* ctx = new Context(LaunchOnStore(request, store, &comm));
    TestAccess::BindContext(test_, ctx);
  }

  // An exception that escapes user code is a fatal failure of this rank,
  // reported where the test is defined (the throw site is unknown).
  template <typename F>
  void Guarded(const std::string& where, F&& f) {
    std::string message;
    try {
      f();
      return;
    } catch (const std::exception& e) {
      message = fmt::format("{} threw {}: {}", where,
                            Demangle(typeid(e).name()), e.what());
    } catch (...) {
      message = fmt::format("{} threw an exception of unknown type", where);
    }
    GTEST_MESSAGE_AT_(file(), line(), message.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
  }

  DistributedTest& test_;
  DistributedFixture* fixture_;
};

void Reraise(const std::vector<Finding>& findings) {
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
    }
  }
}

// Options as the parent applies them: the fixture's, with environment
// overrides.
Options EffectiveOptions(const DistributedTest& test) {
  Options options = TestAccess::options(test);
  if (auto timeout = SecondsVariable(env::kTimeout)) options.timeout = *timeout;
  return options;
}

// `fixture`: the index of the DistributedFixture this rank runs, or -1 for
// the test itself.
[[noreturn]] void RunAsRank(DistributedTest& test, int fixture) {
  auto& fixtures = FixtureAccess::fixtures(test);
  GtestRankProgram program(
      test, fixture < 0 ? nullptr
                        : fixtures[static_cast<std::size_t>(fixture)].get());
  RunRank(program, EffectiveOptions(test));
}

// The fixtures' shared directories: created before the first fixture runs,
// removed with everything in them when the test ends, whatever happened.
class FixtureDirs {
 public:
  FixtureDirs() = default;
  FixtureDirs(const FixtureDirs&) = delete;
  FixtureDirs& operator=(const FixtureDirs&) = delete;
  ~FixtureDirs() {
    for (const std::filesystem::path& dir : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (ec) {
        std::fprintf(stderr, "[ disttest ] warning: cannot remove %s: %s\n",
                     dir.c_str(), ec.message().c_str());
      }
    }
  }

  // A new directory named after the fixture in the temporary directory
  // (TMPDIR, else /tmp); throws Error.
  std::filesystem::path Create(const std::string& fixture) {
    std::string safe;
    for (char c : fixture) {
      safe += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
    }
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern =
        (base / fmt::format("disttest-{}-XXXXXX", safe)).string();
    if (pattern.find('\n') != std::string::npos) {
      throw ConfigError(fmt::format(
          "the temporary directory {} has a newline in its name; set TMPDIR",
          base.string()));
    }
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(
          fmt::format("cannot create a directory for fixture {} in {}: {}",
                      fixture, base.string(), std::strerror(errno)));
    }
    dirs_.emplace_back(pattern);
    return dirs_.back();
  }

  // For kExec ranks: every directory, one per line.
  std::string Joined() const {
    std::string out;
    for (const std::filesystem::path& dir : dirs_) {
      if (!out.empty()) out += '\n';
      out += dir.string();
    }
    return out;
  }

 private:
  std::vector<std::filesystem::path> dirs_;
};

// In a kExec rank: the directories the parent created, in declaration
// order (a forked rank inherited them with the fixture objects).
void AdoptFixtureDirs(DistributedTest& test) {
  const char* joined = std::getenv(env::kInternalFixtureDirs);
  if (joined == nullptr) return;
  auto& fixtures = FixtureAccess::fixtures(test);
  std::string all = joined;
  std::size_t start = 0;
  for (auto& fixture : fixtures) {
    if (start > all.size()) break;
    std::size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    FixtureAccess::SetDir(*fixture, all.substr(start, end - start));
    start = end + 1;
  }
}

// Whether a rank's own part of the test went wrong.
bool RankFailed(const RankReport& r) {
  if (!r.killed_because.empty() || !r.not_started.empty()) return true;
  if (r.done != kVerdictPassed && r.done != kVerdictSkipped) return true;
  for (const RankMessage& m : r.results) {
    if (m.kind == RankMessage::Kind::kFatalFailure ||
        m.kind == RankMessage::Kind::kNonFatalFailure) {
      return true;
    }
  }
  return false;
}

// DISTTEST_LOG_DIR: the end of each failing rank's log, where its last words
// are (output relayed live may be far above, or mixed with other ranks').
void PrintLogTails(const std::vector<RankReport>& ranks) {
  constexpr std::size_t kTailLines = 20;
  for (const RankReport& r : ranks) {
    if (r.log_path.empty() || !RankFailed(r)) continue;
    std::ifstream in(r.log_path);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(std::move(line));
      if (tail.size() > kTailLines) tail.pop_front();
    }
    std::printf(
        "[ disttest ] the last %zu lines of rank %d's output (all of "
        "it: %s):\n",
        tail.size(), r.rank, r.log_path.c_str());
    for (const std::string& line : tail) std::printf("  %s\n", line.c_str());
  }
  std::fflush(stdout);
}

void RecordProperties(const TestSpec& spec) {
  ::testing::Test::RecordProperty("disttest_world_size", spec.world_size);
  ::testing::Test::RecordProperty("disttest_backend",
                                  Name(spec.options.backend));
  ::testing::Test::RecordProperty("disttest_launch", Name(spec.options.launch));
}

// Runs one distributed step of a test (a fixture, or the test itself) and
// re-raises its verdict; false when the test ends here (it failed or
// skipped).
bool RunStep(DistributedTest& test, const TestSpec& spec, int fixture) {
  std::vector<RankReport> ranks;
  try {
    Supervisor supervisor(
        spec, MakeLauncher(spec.options.launch,
                           [&test, fixture] { RunAsRank(test, fixture); }));
    ranks = supervisor.Run();
  } catch (const std::exception& e) {
    std::string message = spec.fixture.empty()
                              ? std::string(e.what())
                              : fmt::format("{}: {}", spec.fixture, e.what());
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, message.c_str(),
                      ::testing::TestPartResult::kFatalFailure);
    return false;
  }
  Reraise(Judge(spec, ranks));
  if (::testing::Test::HasFailure()) {
    PrintLogTails(ranks);
    if (!spec.fixture.empty()) {
      std::printf(
          "[ disttest ] fixture %s failed, so the test's own ranks were not "
          "started\n",
          spec.fixture.c_str());
    }
    std::string rerun = RerunCommand(spec.name);
    ::testing::Test::RecordProperty("disttest_rerun", rerun);
    std::printf("[ disttest ] rerun this test alone: %s\n", rerun.c_str());
    std::fflush(stdout);
    return false;
  }
  return !::testing::Test::IsSkipped();
}

void Supervise(DistributedTest& test) {
  TestSpec spec;
  spec.name = CurrentTestName();
  spec.file = TestAccess::file(test);
  spec.line = TestAccess::line(test);
  spec.world_size = TestAccess::world_size(test);
  auto& fixtures = FixtureAccess::fixtures(test);
  FixtureDirs dirs;
  try {
    spec.options = EffectiveOptions(test);
    RecordProperties(spec);
    if (spec.options.parallel) {
      try {
        Layout fits(spec.world_size, *spec.options.parallel);
      } catch (const ConfigError& e) {
        std::string why =
            fmt::format("options().parallel does not fit {} ranks: {}",
                        spec.world_size, e.what());
        GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                          ::testing::TestPartResult::kSkip);
        return;
      }
    }
    for (auto& fixture : fixtures) {
      FixtureAccess::SetDir(*fixture, dirs.Create(fixture->name()));
    }
  } catch (const std::exception& e) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, e.what(),
                      ::testing::TestPartResult::kFatalFailure);
    return;
  }
  if (!fixtures.empty()) {
    spec.child_env.emplace_back(env::kInternalFixtureDirs, dirs.Joined());
  }
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    TestSpec step = spec;
    step.world_size = fixtures[i]->world_size();
    step.fixture = fixtures[i]->name();
    step.child_env.emplace_back(env::kInternalChildFixture, std::to_string(i));
    if (!RunStep(test, step, static_cast<int>(i))) return;
  }
  RunStep(test, spec, -1);
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

void DistributedTest::TestBody() {
  const char* child = std::getenv(env::kInternalChildTest);
  if (child == nullptr) return internal::Supervise(*this);
  std::string running = internal::CurrentTestName();
  if (running == child) {
    internal::AdoptFixtureDirs(*this);
    internal::RunAsRank(*this, internal::ChildFixtureIndex(*this));
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
  if (comm_ == nullptr) {
    throw Error(
        "comm() is not available: options().init_distributed is false for "
        "this test");
  }
  return *comm_;
}

}  // namespace disttest
