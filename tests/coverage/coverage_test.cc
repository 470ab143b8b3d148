// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Coverage of code that runs only in ranks: coverage_child_ (built with
// --coverage) calls a function only in its ranks; its line count, read back
// with gcov, is the number of ranks that called it, each once, however the
// ranks were started (forked, re-executed, reused), and not the parent's.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "self/child_process.h"

namespace disttest::testing {
namespace {

struct Mode {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;
};

class CoverageTest : public ::testing::TestWithParam<Mode> {};

// gcov's count of the line with `marker` in the child's source, after a run.
long CountOfLine(const std::string& marker) {
  const std::string dir = TempPath(".gcov");
  std::filesystem::create_directory(dir);
  ChildRun gcov =
      RunChild({"/bin/sh", "-c",
                fmt::format("cd '{}' && '{}' -o '{}/coverage_child_.cc.o' '{}'",
                            dir, DISTTEST_GCOV, DISTTEST_COVERAGE_OBJECTS,
                            DISTTEST_COVERAGE_CHILD_SOURCE)},
               {}, std::chrono::seconds(60));
  EXPECT_EQ(gcov.exit_code, 0) << gcov.out << gcov.err;
  std::ifstream in(dir + "/coverage_child_.cc.gcov");
  long count = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.find(marker) == std::string::npos) continue;
    // "        6:   14:  return rank * 2 + 1;  // marker-..."
    const std::string field = line.substr(0, line.find(':'));
    count = field.find_first_of("0123456789") == std::string::npos
                ? 0
                : std::stol(field);
  }
  std::filesystem::remove_all(dir);
  return count;
}

TEST_P(CoverageTest, RanksWriteTheirOwnCountsOnce) {
  const std::string data =
      std::string(DISTTEST_COVERAGE_OBJECTS) + "/coverage_child_.cc.gcda";
  std::filesystem::remove(data);
  ChildRun run = RunChild({DISTTEST_COVERAGE_CHILD}, GetParam().env,
                          std::chrono::seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_TRUE(std::filesystem::exists(data)) << run.out;
  // Two tests of 3 ranks: 6 calls, none of the parent's counted again.
  EXPECT_EQ(CountOfLine("marker-only-in-ranks"), 6);
  if (std::string(GetParam().name) == "fork") {
    // The fixture is made in the parent, once a test (2), and by each rank
    // for itself (6): the forked ranks reset the counts they inherited (the
    // child links __gcov_reset), so they do not count the parent's again
    // (which would make 2 + 3 * 1 + 3 * 2 + 6 = 17).
    EXPECT_EQ(CountOfLine("marker-parent"), 8);
  }
  std::filesystem::remove(data);
}

INSTANTIATE_TEST_SUITE_P(
    LaunchModes, CoverageTest,
    ::testing::Values(Mode{"fork", {}},
                      Mode{"exec", {{"COVERAGE_LAUNCH", "exec"}}},
                      Mode{"pooled", {{"COVERAGE_POOLED", "1"}}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace disttest::testing
