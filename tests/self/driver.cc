// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "driver.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace disttest::testing {

int LineOf(const std::string& marker) {
  return LineIn(DISTTEST_VERDICTS_CHILD_SOURCE, marker);
}

std::string FailureAt(const std::string& marker, const std::string& label) {
  return "verdicts_child_.cc:" + std::to_string(LineOf(marker)) +
         ": Failure\n" + label + " ";
}

Verdict RunVerdicts(const ChildSetup& setup, const std::string& filter,
                    std::vector<std::pair<std::string, std::string>> env,
                    std::chrono::seconds timeout, const OutputWatch& watch) {
  std::string xml_path = TempPath(".xml");
  env.emplace_back("VERDICTS_LAUNCH", setup.launch);
  // DISTTEST_GPUS stands in for the machine's GPUs: not among those an
  // inherited CUDA_VISIBLE_DEVICES shows (a GPU runner's), unless the test
  // gives one.
  auto given = [&](const char* name) {
    return std::any_of(env.begin(), env.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  if (given("DISTTEST_GPUS") && !given("CUDA_VISIBLE_DEVICES")) {
    env.emplace_back("!CUDA_VISIBLE_DEVICES", "");
  }
  std::vector<std::string> args = {setup.binary, "--gtest_filter=" + filter,
                                   "--gtest_output=xml:" + xml_path};
  if (*setup.extra_arg != '\0') args.push_back(setup.extra_arg);
  Verdict v;
  v.run = RunChild(args, env, timeout, watch);
  v.xml = ReadFile(xml_path);
  std::filesystem::remove(xml_path);
  EXPECT_FALSE(v.run.timed_out) << v.run.out << v.run.err;
  EXPECT_THAT(KillOrphans(), ::testing::IsEmpty());
  EXPECT_THAT(ShmLeftovers(v.run.pid), ::testing::IsEmpty());
  return v;
}

}  // namespace disttest::testing
