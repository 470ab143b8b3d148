// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A test's plan, the same in both modes: its steps (each DistributedFixture
// it uses, in declaration order, then the test itself), whether
// options().parallel fits its world, where each step's ranks run (GPUs),
// and the fixtures' shared directories.
//
//   FixtureDirs dirs;                         // removed with the object
//   std::vector<TestSpec> steps = PlanSteps(spec, {{"SavedShards", 2}});
//   if (std::string why = PlaceStepsOnGpus(steps, gpus); !why.empty()) ...
//   for (TestSpec& step : steps) ... run it; stop at the first that fails
#ifndef DISTTEST_SRC_HARNESS_PLAN_STEP_PLAN_H_
#define DISTTEST_SRC_HARNESS_PLAN_STEP_PLAN_H_

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/spec.h"

namespace disttest::internal {

// A fixture as the plan sees it.
struct FixtureStep {
  std::string name;
  int world_size = 0;
};

// The steps of test `spec`: one per fixture, with its world size and name
// (and, for a spawned rank, its index in DISTTEST_INTERNAL_CHILD_FIXTURE),
// then the test itself, last.
std::vector<TestSpec> PlanSteps(const TestSpec& spec,
                                const std::vector<FixtureStep>& fixtures);

// Gives every step's ranks their GPUs (PlaceOnGpus); returns why the
// machine cannot run one ("SavedShards: needs 4 GPUs, found 2 ..."), or "".
// Throws ConfigError when CTest's resource groups do not fit.
std::string PlaceStepsOnGpus(std::vector<TestSpec>& steps, int gpus_per_rank);

// Why options().parallel cannot split the test's world; "" when it can (or
// is not set). Such a test is skipped with this message. Sizes that split
// no world (tensor 0) are a mistake of the test: throws ConfigError.
std::string ParallelMisfit(const TestSpec& spec);

// The fixtures' shared directories: created before the first fixture runs,
// removed with everything in them when the object goes, whatever happened.
// A process this one starts with the first (a shell reading their names
// from a socket) removes them too once it closes: when the object goes,
// or when this process is killed (ctest's SIGKILL at its TIMEOUT, before
// CMake 3.27), which no destructor survives.
class FixtureDirs {
 public:
  FixtureDirs() = default;
  FixtureDirs(const FixtureDirs&) = delete;
  FixtureDirs& operator=(const FixtureDirs&) = delete;
  ~FixtureDirs();

  // A new directory named after the fixture in the temporary directory
  // (TMPDIR, else /tmp); throws Error.
  std::filesystem::path Create(const std::string& fixture);
  // Every directory, one per line (for ranks that are not this process's
  // forks, and for a launched job's other ranks).
  std::string Joined() const;
  // The directories in Joined()'s text, in order.
  static std::vector<std::string> Split(const std::string& joined);

 private:
  // Starts the process that removes the directories after this one; false
  // where it cannot (then only the destructor removes them).
  bool StartRemover();

  std::vector<std::filesystem::path> dirs_;
  int remover_names_ = -1;  // Where the names go, a line each.
  pid_t remover_ = -1;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PLAN_STEP_PLAN_H_
