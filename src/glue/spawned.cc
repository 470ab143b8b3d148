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
void RunAsRank(DistributedTest& test, int fixture,
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

namespace {

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

}  // namespace

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

}  // namespace disttest::internal
