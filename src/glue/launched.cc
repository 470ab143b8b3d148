// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The run of a launched test (launched.h): what is checked before it (its
// options, the job, the ranks' plans, its world size), its steps
// (launched_steps.cc), and what a test that breaks the run says. Whether
// this process is a launched rank at all: launched_detection.cc.
#include "glue/launched.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "disttest/env/names.h"
#include "glue/launched_detection.h"
#include "glue/launched_steps.h"
#include "glue/rank_program.h"
#include "harness/launched/job.h"
#include "harness/launched/step_protocol.h"
#include "harness/process/interrupt.h"
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

void RunLaunched(DistributedTest& test) {
  TestSpec spec = SpecOf(test);
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
  if (std::string why = ParallelMisfit(spec); !why.empty()) {
    return Skip(spec, why);
  }

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
    RunSteps(*job, test, spec, seq);
  } catch (const std::exception& e) {
    BreakTheRun(*job, spec, e);
  }
}

}  // namespace disttest::internal
