// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the self-test drivers share: running the child binary verdicts_child_
// (or its own-main twin) on a filter, and finding lines in its source.
//
//   Verdict v = RunVerdicts(kForkSetup, "Verdicts.Throws/2ranks");
//   EXPECT_THAT(v.run.out, HasSubstr(FailureAt("marker-throw", "[rank 1/2]")));
#ifndef DISTTEST_TESTS_SELF_DRIVER_H_
#define DISTTEST_TESTS_SELF_DRIVER_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.h"

namespace disttest::testing {

struct Verdict {
  ChildRun run;
  std::string xml;
};

// Which child binary, and how it launches its ranks.
struct ChildSetup {
  const char* name;
  const char* binary;
  const char* launch;     // VERDICTS_LAUNCH: "fork" or "exec".
  const char* extra_arg;  // The own-main binary insists on a flag.
};

inline void PrintTo(const ChildSetup& setup, std::ostream* os) {
  *os << setup.name;
}

inline constexpr ChildSetup kForkSetup{"fork", DISTTEST_VERDICTS_CHILD, "fork",
                                       ""};
inline constexpr ChildSetup kExecSetup{"exec", DISTTEST_VERDICTS_CHILD, "exec",
                                       ""};

// Line of the first source line of the child that contains `marker`.
int LineOf(const std::string& marker);

// "verdicts_child_.cc:42: Failure\n[rank 1/2] "
std::string FailureAt(const std::string& marker, const std::string& label);

// Runs the child on `filter` with --gtest_output=xml, then checks (with
// EXPECT) that it finished in time and left no queue and no process behind.
Verdict RunVerdicts(const ChildSetup& setup, const std::string& filter,
                    std::vector<std::pair<std::string, std::string>> env = {},
                    std::chrono::seconds timeout = std::chrono::seconds(120),
                    const OutputWatch& watch = nullptr);

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SELF_DRIVER_H_
