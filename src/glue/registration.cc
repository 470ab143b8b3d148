// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/threads.h"
#include "disttest/distributed_test.h"
#include "disttest/error.h"
#include "disttest/internal/gtest_spi.h"

namespace disttest::internal {

std::map<std::string, std::function<DistributedTest*()>>& TestFactories() {
  // Never destroyed: registration runs during static initialisation, in any
  // order, and pooled ranks leave with _exit.
  static auto* factories =
      new std::map<std::string, std::function<DistributedTest*()>>;
  return *factories;
}

std::string DistributedTestName(const char* name, int world_size) {
  if (world_size >= 1 && world_size <= kMaxWorldSize) {
    return fmt::format("{}/{}ranks", name, world_size);
  }
  // Still registered, so that running it says what is wrong; named without
  // '-', which --gtest_filter would read as the start of a negative pattern.
  return fmt::format("{}/invalid_world_size_{}{}", name,
                     world_size < 0 ? "minus_" : "",
                     world_size < 0 ? -static_cast<long>(world_size)
                                    : static_cast<long>(world_size));
}

std::string DuplicateWorldSizeName(const char* name, int world_size,
                                   const std::vector<int>& sizes,
                                   std::size_t index) {
  const long earlier =
      std::count(sizes.begin(), sizes.begin() + index, world_size);
  std::string test = DistributedTestName(name, world_size) + "_listed_again";
  if (earlier > 1) test += std::to_string(earlier);
  return test;
}

std::string DuplicateWorldSizeError(const char* macro, const char* suite,
                                    const char* name, int world_size) {
  return fmt::format(
      "{}({}, {}, ...) lists world size {} more than once; list each world "
      "size once",
      macro, suite, name, world_size);
}

std::vector<ParamTestFactory>& ParamTestFactories() {
  // Never destroyed, as TestFactories(); filled when gtest registers the
  // instantiations (InitGoogleTest).
  static auto* factories = new std::vector<ParamTestFactory>;
  return *factories;
}

std::function<DistributedTest*()> FindParamTestFactory(
    const std::string& test) {
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const ::testing::TestSuite* suite = unit->GetTestSuite(i);
    const std::string suite_name = suite->name();
    if (test.compare(0, suite_name.size() + 1, suite_name + ".") != 0) continue;
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const ::testing::TestInfo* info = suite->GetTestInfo(j);
      if (info->value_param() == nullptr ||
          suite_name + "." + info->name() != test) {
        continue;
      }
      // "Prefix/Suite", "Name/4ranks/param".
      const std::string name = info->name();
      const std::string base = suite_name.substr(suite_name.rfind('/') + 1);
      const std::string pattern = name.substr(0, name.rfind('/'));
      std::function<DistributedTest*()> found;
      int matches = 0;
      for (const ParamTestFactory& f : ParamTestFactories()) {
        if (f.suite == base && f.pattern == pattern &&
            f.param == info->value_param()) {
          found = f.make;
          ++matches;
        }
      }
      if (matches > 1) {
        // Running another parameter's test under this one's name could
        // pass a case that never ran: refuse.
        throw Error(fmt::format(
            "{} parameters of {}.{} print as '{}', so a reused rank cannot "
            "tell which is {}'s; give the parameter type a PrintTo() that "
            "tells them apart, or run this suite without "
            "options().reuse_workers",
            matches, base, pattern, info->value_param(), test));
      }
      if (matches == 0 &&
          std::strstr(info->value_param(), "-byte object <") != nullptr) {
        // gtest prints such a type's every byte, padding too, which differs
        // between copies of one value.
        throw Error(fmt::format(
            "the parameter of {} prints as its bytes ('{}'), which differ "
            "between copies of one value (padding), so a reused rank cannot "
            "find its test by it; give the parameter type a PrintTo(), or run "
            "this suite without options().reuse_workers",
            test, info->value_param()));
      }
      return found;
    }
  }
  return nullptr;
}

bool MayInterceptAllThreads(const char* macro, const char* file, int line) {
  if (!RanksAreThreads()) return true;
  const std::string message = fmt::format(
      "{} takes the failures of every thread of the process, and here the "
      "ranks are threads of one process (LaunchMode::kThreads): it would take "
      "another rank's failure as this rank's, and miss this rank's own. Run "
      "the test as processes (options().process_only = true), or expect this "
      "thread's failure alone (EXPECT_FATAL_FAILURE, EXPECT_NONFATAL_FAILURE)",
      macro);
  GTEST_MESSAGE_AT_(file, line, message.c_str(),
                    ::testing::TestPartResult::kNonFatalFailure);
  return false;
}

}  // namespace disttest::internal
