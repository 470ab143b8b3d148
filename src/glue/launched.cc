// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The run of a launched test (launched.h): what is checked before it (its
// options, the job, the ranks' plans, its world size), its steps
// (launched_steps.cc), and what a test that breaks the run says. Whether
// this process is a launched rank at all: launched_detection.cc.
#include "glue/launched.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/peer_errors.h"
#include "disttest/env/names.h"
#include "glue/launched_detection.h"
#include "glue/launched_steps.h"
#include "glue/rank_program.h"
#include "harness/launched/job.h"
#include "harness/launched/keys.h"
#include "harness/launched/step_protocol.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/rank_message.h"
#include "harness/spawn/rank_spawner.h"
#include "launch/launch_internal.h"

namespace disttest::internal {
namespace {

using launched::Clock;
using launched::LaunchedJob;

// Whether gtest's test name `name` is a distributed test's: a part of it
// is "<N>ranks" or "invalid_world_size_..." (registration.h). Plain tests
// may differ between ranks (parameters from the local devices); the ranks
// must agree on the distributed ones.
bool IsDistributedTestName(std::string_view name) {
  while (!name.empty()) {
    const std::size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    const std::size_t digits = part.find_first_not_of("0123456789");
    if ((digits > 0 && digits != std::string_view::npos &&
         part.substr(digits) == "ranks") ||
        part.rfind("invalid_world_size_", 0) == 0) {
      return true;
    }
    if (slash == std::string_view::npos) break;
    name.remove_prefix(slash + 1);
  }
  return false;
}

// The distributed tests this process will run, in order, with its world
// size and repeat count: compared across the ranks before the first test.
launched::RunPlan ThisRunPlan(const LaunchedJob& job) {
  launched::RunPlan plan;
  plan.world_size = job.size();
  plan.repeat = GTEST_FLAG_GET(repeat);
  // What each rank's deadlines, checks and GPUs follow: a rank whose
  // timeout differs rendezvouses on other keys, and waits for ever.
  for (const char* name :
       {env::kTimeout, env::kTimeoutScale, env::kCompareCalls, env::kHeartbeat,
        env::kShareGpus, env::kRequireGpus}) {
    const char* value = std::getenv(name);
    plan.settings.push_back(value != nullptr ? fmt::format("{}={}", name, value)
                                             : fmt::format("{} unset", name));
  }
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(j);
      if (info.should_run() && IsDistributedTestName(info.name())) {
        plan.tests.push_back(fmt::format("{}.{}", suite.name(), info.name()));
        plan.params.push_back(PrintedParam(info.value_param()));
      }
    }
  }
  return plan;
}

// Why the ranks cannot run this run's tests together (rank 1 given fewer
// tests, another WORLD_SIZE), found at the first test and said by every
// test; "" when they can.
std::string PlansDiffer(LaunchedJob& job, const TestSpec& spec) {
  static bool compared = false;
  static std::string differ;
  if (!compared) {
    compared = true;
    try {
      launched::ComparePlans(job, ThisRunPlan(job),
                             Clock::now() + spec.options.timeout);
    } catch (const std::exception& e) {
      differ = e.what();
      job.liveness().Break(differ);
    }
  }
  return differ;
}

// The launched test that gtest runs now, as this process saw it: whether
// its body ran here (RunLaunched), and which of its results gtest recorded
// before the body (the fixture's constructor, SetUp()) and after it
// (TearDown(), the destructor): rank 0 must hear of those of the other
// ranks, which gtest records in their own processes only.
struct TestHere {
  const ::testing::TestInfo* info = nullptr;  // Whose body ran here.
  int before = 0;  // Its results recorded before the body,
  int after = 0;   // and up to the body's end.
  // Those before the body went with a step's report (no body here; a rank
  // of the test's): rank 0 has them.
  bool told_in_step = false;
  int seq = -1;  // Its number in the run; -1: it took none.
  int world_size = 0;
  std::chrono::milliseconds timeout{0};
  std::string file;
  int line = 0;
};
TestHere g_test;

int PartsSoFar() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr ? info->result()->total_part_count() : 0;
}

// The first test that breaks the run: a rank other than 0 says so on its
// own stderr too (its gtest output is dropped, and rank 0 may never hear of
// it); the tests after fail at once, saying it again.
void BreakTheRun(LaunchedJob& job, const TestSpec& spec,
                 const std::exception& e) {
  static bool said = false;
  if (job.rank() != 0 && !said) {
    said = true;
    std::fprintf(stderr,
                 "[ disttest ] rank %d of %d on %s: %s: %s; this rank's "
                 "later tests fail at once\n",
                 job.rank(), job.size(), Hostname().c_str(), spec.name.c_str(),
                 e.what());
    std::fflush(stderr);
  }
  job.liveness().Break(e.what());
  job.communicators().Drop();
  Fatal(spec, e.what());
}

}  // namespace

void RunLaunched(DistributedTest& test, bool no_body) {
  TestSpec spec = SpecOf(test);
  g_test = TestHere{};
  g_test.info = ::testing::UnitTest::GetInstance()->current_test_info();
  g_test.before = PartsSoFar();
  struct BodyEnd {
    ~BodyEnd() { g_test.after = PartsSoFar(); }
  } body_end;
  LaunchedJob* job = nullptr;
  try {
    spec.options = EffectiveOptions(test);
  } catch (const std::exception& e) {
    return Fatal(spec, e.what());  // A malformed option or variable.
  }
  try {
    RecordProperties(spec);
    job = &JoinLaunchedJob();
  } catch (const std::exception& e) {
    Fatal(spec, LauncherEnvError().empty()
                    ? fmt::format("disttest cannot join the launched ranks: {}",
                                  e.what())
                    : LauncherEnvError());
    return;
  }
  ::testing::Test::RecordProperty("disttest_launcher", job->env().launcher);
  if (std::string differ = PlansDiffer(*job, spec); !differ.empty()) {
    return Fatal(spec, "not run: " + differ);
  }
  const int seq = job->NextSeq();
  g_test.seq = seq;
  g_test.world_size = spec.world_size;
  g_test.timeout = spec.options.timeout;
  g_test.file = spec.file;
  g_test.line = spec.line;
  if (std::string broken = job->liveness().broken(); !broken.empty()) {
    Fatal(spec, fmt::format("not run: the launched ranks stopped working "
                            "together in an earlier test ({})",
                            broken));
    return;
  }
  const int n = spec.world_size;
  if (n < 1 || n > kMaxWorldSize) {
    Fatal(spec, fmt::format("world size {} is invalid: it must be in [1, {}]",
                            n, kMaxWorldSize));
    return;
  }
  if (n > job->size()) {
    return Skip(
        spec, fmt::format("needs {} ranks, launched with {}", n, job->size()));
  }
  std::string misfit;
  try {
    misfit = ParallelMisfit(spec);
  } catch (const ConfigError& e) {
    return Fatal(spec, e.what());  // Sizes that split no world.
  }
  if (!misfit.empty()) return Skip(spec, misfit);

  // SIGTERM or SIGINT meanwhile ends this test with its report (each
  // rank's side thread takes its ledger and stacks and cuts the
  // collectives), and gtest skips the rest.
  InterruptGuard interrupts;
  struct AfterInterrupt {
    const TestSpec& spec;
    bool quiet;
    ~AfterInterrupt() { StopAfterInterrupt(spec, quiet, /*launched=*/true); }
  } after{spec, job->rank() != 0};
  // Each step (each fixture, then the test) gets the whole timeout, as
  // in spawned mode.
  try {
    RunSteps(*job, test, spec, seq, no_body, &g_test.told_in_step);
  } catch (const std::exception& e) {
    BreakTheRun(*job, spec, e);
  }
}

namespace {

// Where a result of test `t` at index `i` of its results came from.
const char* Outside(const TestHere& t, int i) {
  return i < t.before ? "before its body, in the fixture's constructor or "
                        "SetUp()"
                      : "after its body, in TearDown() or the fixture's "
                        "destructor";
}

// A rank other than 0: what gtest recorded here outside the body of the
// test that ended, to rank 0 (nothing else waits for it).
void TellRankZero(LaunchedJob& job, const ::testing::TestInfo& info) {
  const ::testing::TestResult& result = *info.result();
  std::vector<RankMessage> outside;
  for (int i = 0; i < result.total_part_count(); ++i) {
    if (i < g_test.before && g_test.told_in_step) continue;
    if (i >= g_test.before && i < g_test.after) continue;
    const ::testing::TestPartResult& r = result.GetTestPartResult(i);
    if (!r.failed() && !r.skipped()) continue;
    RankMessage m;
    m.kind = r.skipped()          ? RankMessage::Kind::kSkip
             : r.fatally_failed() ? RankMessage::Kind::kFatalFailure
                                  : RankMessage::Kind::kNonFatalFailure;
    m.file = r.file_name() != nullptr ? r.file_name() : "";
    m.line = r.line_number();
    m.message = fmt::format("{} ({})", r.message(), Outside(g_test, i));
    outside.push_back(std::move(m));
  }
  const int rank = job.rank();
  for (std::size_t i = 0; i < outside.size(); ++i) {
    const std::vector<char> bytes = EncodeRankMessage(outside[i], 1 << 20);
    job.store().set(
        launched::OutsideMessageKey(g_test.seq, rank, static_cast<int>(i)),
        std::string(bytes.begin(), bytes.end()));
  }
  job.store().set(launched::OutsideKey(g_test.seq, rank),
                  std::to_string(outside.size()));
}

// Rank 0: what the other ranks recorded outside their bodies, as failures
// of the test here, labelled by rank; true when there was any. Its wait
// ends at the test's timeout, at a rank that died, and soon after a signal.
bool HearTheOthers(LaunchedJob& job) {
  std::vector<std::string> keys;
  std::vector<int> from;
  for (int r = 1; r < job.size(); ++r) {
    keys.push_back(launched::OutsideKey(g_test.seq, r));
    from.push_back(r);
  }
  const std::map<int, std::string> missing = job.liveness().AwaitResults(
      keys, from, Clock::now() + g_test.timeout, /*cut_on_interrupt=*/true);
  bool any = false;
  // Skips where rank 0 skipped too agree with it (every rank's SetUp()
  // skipping a test that is skipped anyway).
  const bool skipped_here = ::testing::Test::IsSkipped();
  for (int r = 1; r < job.size(); ++r) {
    const std::string label =
        r < g_test.world_size
            ? fmt::format("[rank {}/{}]", r, g_test.world_size)
            : fmt::format("[launched rank {} of {}, outside the test's {}]", r,
                          job.size(), g_test.world_size);
    if (auto it = missing.find(r); it != missing.end()) {
      // The run that broke said so already.
      if (!job.liveness().broken().empty()) continue;
      const std::string text = fmt::format(
          "{} did not say what it recorded outside its body (its fixture's "
          "constructor, SetUp(), TearDown(), destructor): {}",
          label, it->second);
      GTEST_MESSAGE_AT_(g_test.file.c_str(), g_test.line, text.c_str(),
                        ::testing::TestPartResult::kNonFatalFailure);
      any = true;
      continue;
    }
    const std::vector<char> count =
        job.store().get(launched::OutsideKey(g_test.seq, r));
    const int n = std::atoi(std::string(count.begin(), count.end()).c_str());
    for (int i = 0; i < n; ++i) {
      const std::vector<char> bytes =
          job.store().get(launched::OutsideMessageKey(g_test.seq, r, i));
      RankMessage m;
      std::string error;
      if (!DecodeRankMessage(bytes.data(), bytes.size(), &m, &error)) {
        m = {RankMessage::Kind::kNonFatalFailure, g_test.file, g_test.line,
             "a result it recorded outside its body could not be read: " +
                 error};
      }
      if (m.kind == RankMessage::Kind::kSkip && skipped_here) continue;
      // Failed, whatever it was: a skip on one rank is none of the test's.
      const std::string text =
          m.kind == RankMessage::Kind::kSkip
              ? fmt::format("{} skipped while rank 0 ran the test: {}", label,
                            m.message)
              : fmt::format("{} {}", label, m.message);
      GTEST_MESSAGE_AT_(m.file.empty() ? g_test.file.c_str() : m.file.c_str(),
                        m.file.empty() ? g_test.line : m.line, text.c_str(),
                        m.kind == RankMessage::Kind::kFatalFailure
                            ? ::testing::TestPartResult::kFatalFailure
                            : ::testing::TestPartResult::kNonFatalFailure);
      any = true;
    }
  }
  return any;
}

// A rank other than 0: whether rank 0 failed the test for what came
// outside the bodies, mirrored here (so that every rank's verdict, its exit
// status and --gtest_fail_fast agree).
void MirrorRankZero(LaunchedJob& job) {
  const std::string key = launched::OutsideVerdictKey(g_test.seq);
  const std::map<int, std::string> missing = job.liveness().AwaitResults(
      {key}, {0}, Clock::now() + g_test.timeout, /*cut_on_interrupt=*/true);
  if (!missing.empty() || ::testing::Test::HasFailure()) return;
  const std::vector<char> v = job.store().get(key);
  if (std::string(v.begin(), v.end()) != "failed") return;
  const NoBreakOnFailure no_break;  // Rank 0's report, not this rank's.
  GTEST_MESSAGE_AT_(g_test.file.c_str(), g_test.line,
                    "failed; rank 0 reports why",
                    ::testing::TestPartResult::kFatalFailure);
}

// The stand-in could not be made (its constructor throws again, its
// parameters print alike): the others would wait for this rank at the
// test's start; the run stops instead, saying why.
void CannotStandIn(const ::testing::TestInfo& info, const std::string& why) {
  const std::string text = fmt::format(
      "gtest ran no body of {}.{} on this rank (a fatal failure or a skip in "
      "its constructor or SetUp()), and disttest could not make the test "
      "again to meet the other ranks: {}",
      info.test_suite_name(), info.name(), why);
  GTEST_MESSAGE_AT_(info.file(), info.line(), text.c_str(),
                    ::testing::TestPartResult::kFatalFailure);
  try {
    LaunchedJob& job = JoinLaunchedJob();
    job.liveness().Break(fmt::format("rank {} {}", job.rank(), text));
  } catch (...) {
    // No job: nothing waits for this rank.
  }
}

// At the end of each distributed test of a launched run (after its
// destructor; before gtest prints its result, as listeners end in reverse
// order): the body that gtest did not run here, then what each rank
// recorded outside its body, to rank 0.
class OutsideTheBody : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    g_test = {};
    // What an earlier test's communicators noted (peer_errors.h) is not
    // this test's (a spawned rank forgets it as it starts: RunRank).
    ForgetErrorsOfPeers();
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (IsDeathTestChild() || ::testing::internal::InDeathTestChild() ||
        LaunchedEnvOrNull() == nullptr || !IsDistributedTestName(info.name())) {
      return;
    }
    if (g_test.info != &info && LastTestObjectMadeFor() == &info &&
        PendingInterrupt() == 0) {
      // A fatal failure or a skip in the constructor or SetUp(): the
      // others wait for this rank at the test's start. (A test gtest
      // skipped unmade, after --gtest_fail_fast's first failure, is
      // skipped so on every rank.)
      std::unique_ptr<GtestRankProgram> stand_in;
      std::string why = "no test of that name is registered here";
      try {
        stand_in = GtestRankProgram::Own(
            fmt::format("{}.{}", info.test_suite_name(), info.name()));
      } catch (const std::exception& e) {
        why = e.what();
      } catch (...) {
        why = "its constructor threw something that is no std::exception";
      }
      if (stand_in == nullptr) return CannotStandIn(info, why);
      RunLaunched(stand_in->test(), /*no_body=*/true);
      // Its destructor runs the test's again: what that records is the
      // stand-in's, said already by the test's own.
      stand_in.reset();
      g_test.after = PartsSoFar();
    }
    if (g_test.seq < 0 || g_test.info != &info) return;
    try {
      LaunchedJob& job = JoinLaunchedJob();
      if (job.rank() == 0) {
        const bool failed = HearTheOthers(job);
        job.store().set(launched::OutsideVerdictKey(g_test.seq),
                        failed ? "failed" : "ok");
      } else {
        TellRankZero(job, info);
        MirrorRankZero(job);
      }
    } catch (const std::exception& e) {
      if (::testing::Test::HasFailure()) return;  // Said, or the run broke.
      const std::string why = fmt::format(
          "disttest could not gather what the ranks recorded outside the "
          "test's body (its constructor, SetUp(), TearDown() and destructor): "
          "{}",
          e.what());
      GTEST_MESSAGE_AT_(g_test.file.c_str(), g_test.line, why.c_str(),
                        ::testing::TestPartResult::kNonFatalFailure);
    }
  }
};

const bool kOutsideTheBodyWatched = [] {
  if (!LaunchedRun()) return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(new OutsideTheBody);
  return true;
}();

}  // namespace

}  // namespace disttest::internal
