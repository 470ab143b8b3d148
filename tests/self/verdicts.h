// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The verdict self-tests' fixture, shared by verdicts_*_test.cc: each test
// runs cases of the child binary verdicts_child_ in every launch mode
// (INSTANTIATE_TEST_SUITE_P in verdicts_test.cc) and judges what it did.
#ifndef DISTTEST_TESTS_SELF_VERDICTS_H_
#define DISTTEST_TESTS_SELF_VERDICTS_H_

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.h"
#include "driver.h"
#include "env/knobs.h"

namespace disttest::testing {

using ::testing::HasSubstr;
using ::testing::Not;

// The "marker-pool <test> pid <pid> count <n>" lines of rank `rank`:
// test -> {pid, n} (verdicts_pools_test.cc).
std::map<std::string, std::pair<int, int>> PoolLines(const std::string& out,
                                                     int rank);

// How often `needle` occurs in `haystack` (an int, as the counts it is
// compared with).
inline int Count(const std::string& haystack, const std::string& needle) {
  return static_cast<int>(Occurrences(haystack, needle));
}

// A case that cannot apply to ranks that are threads, and why.
#define SKIP_FOR_THREADS(why)                                       \
  if (Threads()) {                                                  \
    GTEST_SKIP() << "cannot apply to ranks that are threads: " why; \
  }

// ThreadSanitizer in this build (DISTTEST_SANITIZE=thread).
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

// A case whose point ThreadSanitizer changes when ranks are threads.
#define SKIP_FOR_THREADS_UNDER_TSAN(why)                                  \
  if (Threads() && kUnderThreadSanitizer) {                               \
    GTEST_SKIP() << "under ThreadSanitizer, with ranks as threads: " why; \
  }

// A case of ranks that are threads alone.
#define SKIP_FOR_THREADS_ONLY()                                            \
  if (!Threads()) {                                                        \
    GTEST_SKIP() << "a case of ranks that are threads (process ranks end " \
                    "with _exit, which destroys no thread_local)";         \
  }

class VerdictsTest : public ::testing::TestWithParam<ChildSetup> {
 protected:
  Verdict Run(const std::string& filter,
              std::vector<std::pair<std::string, std::string>> env = {}) {
    return RunVerdicts(GetParam(), filter, std::move(env));
  }
  // Whether the ranks are threads of one process (LaunchMode::kThreads).
  bool Threads() const { return std::string(GetParam().launch) == "threads"; }
  // The verdict of rank `rank` of `world`, which killed itself with
  // SIGKILL: "[rank 1/2] killed by signal 9 (SIGKILL)". Ranks that are
  // threads die with their process, and no handler runs on SIGKILL to say
  // whose thread it was: those still running are named together with it.
  ::testing::Matcher<const std::string&> KilledBySigkill(int rank,
                                                         int world) const {
    if (!Threads()) {
      return HasSubstr(fmt::format("[rank {}/{}] killed by signal 9 (SIGKILL)",
                                   rank, world));
    }
    return ::testing::ContainsRegex(fmt::format(
        "\\[ranks? ({}/{}|[0-9, -]*{}[0-9, -]* of {})\\] (\\(first failure\\) "
        ")?killed by signal 9 \\(SIGKILL\\)",
        rank, world, rank, world));
  }
  // How rank `rank`'s output is labelled: "[rank 1] ", or, for ranks that
  // are threads, their process's one label (they share its output).
  std::string Out(int rank) const {
    return Threads() ? std::string("[rank threads] ")
                     : fmt::format("[rank {}] ", rank);
  }
};

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SELF_VERDICTS_H_
