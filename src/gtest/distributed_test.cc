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

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <typeinfo>

#include "disttest/env/names.h"
#include "disttest/error.h"
#include "gtest/current_communicator.h"
#include "harness/launcher.h"
#include "harness/rank_main.h"
#include "harness/rank_outcome.h"
#include "harness/supervisor.h"
#include "harness/verdict.h"

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

class GtestRankProgram : public RankProgram {
 public:
  explicit GtestRankProgram(DistributedTest& test) : test_(test) {}

  RankVerdict Run(const RankEnv& env, Communicator* comm,
                  const ReportFn& report) override {
    TestAccess::Bind(test_, &env, comm);
    SetCurrentCommunicator(comm);
    ChannelReporter reporter(report);
    Guarded("SetUpRank()", [&] { TestAccess::SetUpRank(test_); });
    if (!reporter.stops_body()) {
      Guarded("the test body", [&] { TestAccess::Body(test_); });
    }
    Guarded("TearDownRank()", [&] { TestAccess::TearDownRank(test_); });
    if (reporter.failed()) return RankVerdict::kFailed;
    return reporter.skipped() ? RankVerdict::kSkipped : RankVerdict::kPassed;
  }
  const char* file() const override { return TestAccess::file(test_); }
  int line() const override { return TestAccess::line(test_); }

 private:
  // An exception that escapes user code is a fatal failure of this rank,
  // reported where the test is defined (the throw site is unknown).
  template <typename F>
  void Guarded(const char* where, F&& f) {
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

[[noreturn]] void RunAsRank(DistributedTest& test) {
  GtestRankProgram program(test);
  RunRank(program, EffectiveOptions(test));
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

void Supervise(DistributedTest& test) {
  TestSpec spec;
  spec.name = CurrentTestName();
  spec.file = TestAccess::file(test);
  spec.line = TestAccess::line(test);
  spec.world_size = TestAccess::world_size(test);
  std::vector<RankReport> ranks;
  try {
    spec.options = EffectiveOptions(test);
    RecordProperties(spec);
    Supervisor supervisor(
        spec, MakeLauncher(spec.options.launch, [&] { RunAsRank(test); }));
    ranks = supervisor.Run();
  } catch (const std::exception& e) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, e.what(),
                      ::testing::TestPartResult::kFatalFailure);
    return;
  }
  Reraise(Judge(spec, ranks));
  if (::testing::Test::HasFailure()) {
    PrintLogTails(ranks);
    std::string rerun = RerunCommand(spec.name);
    ::testing::Test::RecordProperty("disttest_rerun", rerun);
    std::printf("[ disttest ] rerun this test alone: %s\n", rerun.c_str());
    std::fflush(stdout);
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
  if (running == child) internal::RunAsRank(*this);
  // A re-executed rank must run only its own test; spawning ranks of another
  // one from here would nest whole tests inside a rank.
  std::fprintf(stderr,
               "disttest: this process was started as a rank of %s, but gtest "
               "is running %s (does main() change --gtest_filter?)\n",
               child, running.c_str());
  std::fflush(stderr);
  _exit(internal::kExitHarnessError);
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
