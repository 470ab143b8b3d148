// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/plan/step_plan.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/launch/config.h"
#include "env/internal_names.h"
#include "harness/plan/gpu_placement.h"

namespace disttest::internal {

std::vector<TestSpec> PlanSteps(const TestSpec& spec,
                                const std::vector<FixtureStep>& fixtures) {
  std::vector<TestSpec> steps;
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    TestSpec& step = steps.emplace_back(spec);
    step.world_size = fixtures[i].world_size;
    step.fixture = fixtures[i].name;
    step.child_env.emplace_back(env::kInternalChildFixture, std::to_string(i));
  }
  steps.push_back(spec);
  return steps;
}

std::string PlaceStepsOnGpus(std::vector<TestSpec>& steps, int gpus_per_rank) {
  for (TestSpec& step : steps) {
    std::string why = PlaceOnGpus(step, gpus_per_rank);
    if (why.empty()) continue;
    if (!step.fixture.empty()) why = fmt::format("{}: {}", step.fixture, why);
    return why;
  }
  return "";
}

std::string ParallelMisfit(const TestSpec& spec) {
  if (!spec.options.parallel) return "";
  try {
    Layout::CheckSizes(*spec.options.parallel);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("options().parallel splits no world: {}", e.what()));
  }
  try {
    Layout fits(spec.world_size, *spec.options.parallel);
  } catch (const ConfigError& e) {
    return fmt::format("options().parallel does not fit {} ranks: {}",
                       spec.world_size, e.what());
  }
  return "";
}

FixtureDirs::~FixtureDirs() {
  for (const std::filesystem::path& dir : dirs_) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) {
      std::fprintf(stderr, "[ disttest ] warning: cannot remove %s: %s\n",
                   dir.c_str(), ec.message().c_str());
    }
  }
}

std::filesystem::path FixtureDirs::Create(const std::string& fixture) {
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

std::string FixtureDirs::Joined() const {
  std::string out;
  for (const std::filesystem::path& dir : dirs_) {
    if (!out.empty()) out += '\n';
    out += dir.string();
  }
  return out;
}

std::vector<std::string> FixtureDirs::Split(const std::string& joined) {
  std::vector<std::string> dirs;
  std::size_t start = 0;
  while (start <= joined.size()) {
    std::size_t end = joined.find('\n', start);
    if (end == std::string::npos) end = joined.size();
    dirs.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

}  // namespace disttest::internal
