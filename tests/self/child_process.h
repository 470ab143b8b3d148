// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: runs a binary with a deadline and captures what it printed,
// and finds what a run left behind.
//
//   ChildRun run = RunChild({kChildBinary, "--gtest_filter=Verdicts.Passes*"},
//                           {{"VERDICTS_LAUNCH", "exec"}});
//   EXPECT_EQ(run.exit_code, 0) << run.out;
#ifndef DISTTEST_TESTS_SELF_CHILD_PROCESS_H_
#define DISTTEST_TESTS_SELF_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace disttest::testing {

struct ChildRun {
  pid_t pid = -1;
  int exit_code = -1;  // -1 when it did not exit normally.
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{};
};

// Called with the child's pid and its stdout and stderr so far, after each
// read: a test can act on the child once it has printed something.
using OutputWatch =
    std::function<void(pid_t, const std::string&, const std::string&)>;

// Safe to call from several threads at once. `env` replaces the inherited
// variables of its names; a name written "!NAME" removes NAME.
ChildRun RunChild(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& env = {},
    std::chrono::seconds timeout = std::chrono::seconds(120),
    const OutputWatch& watch = nullptr);

// /dev/shm entries whose name starts with "disttest-<pid>-".
std::vector<std::string> ShmLeftovers(pid_t pid);

// Descendants of RunChild's children that outlived them. RunChild makes this
// process a child subreaper, so an orphaned rank is re-parented here rather
// than to init, where a test running beside this one could not tell it from
// its own. One that dies within two seconds (it was killed with its group
// and is still exiting) is only reaped; one alive after that is described,
// killed and reaped.
std::vector<std::string> KillOrphans();

// The text of file `path` ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// The number of the first line of file `path` that holds `marker`; -1, and
// a test failure, when none does.
int LineIn(const std::string& path, const std::string& marker);

// How often `needle` occurs in `text` (occurrences that do not overlap).
std::size_t Occurrences(const std::string& text, const std::string& needle);

// The <testcase name="name" .../> element of a gtest XML report, or "".
std::string TestCaseXml(const std::string& xml, const std::string& name);

// A fresh path under the temp directory, "disttest-selftest-<pid>-<n><suffix>".
std::string TempPath(const std::string& suffix);

// The ranks that the failures containing `what` in `text` (a child's
// output, or its XML) name in their labels, "[rank 2/4] ..." or grouped,
// "[ranks 0-1, 3 of 4] ...": whichever way the verdict put them.
std::set<int> RanksNaming(const std::string& text, const std::string& what);

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SELF_CHILD_PROCESS_H_
