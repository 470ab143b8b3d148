// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// This process's command line: what a re-executed rank runs again, what a
// rerun line says, and whether this is a gtest death test's child.
//
//   std::vector<std::string> args = ReadCommandLine();   // argv, as started
//   if (!IsParentOnlyFlag(arg)) ...                       // for a rank's argv
//   std::printf("rerun: %s\n", RerunCommand(test).c_str());
#ifndef DISTTEST_SRC_HARNESS_PROCESS_COMMAND_LINE_H_
#define DISTTEST_SRC_HARNESS_PROCESS_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <vector>

namespace disttest::internal {

// This process's arguments, as it was started (/proc/self/cmdline).
std::vector<std::string> ReadCommandLine();

// Whether `arg` is a gtest flag that belongs to the parent's run and would
// change what a rank process runs or writes (--gtest_filter, _output, ...).
bool IsParentOnlyFlag(const std::string& arg);

// Whether this process is the child of a gtest death test in the
// "threadsafe" style (this binary re-executed with
// --gtest_internal_run_death_test): it runs the body up to the EXPECT_DEATH
// in place, as the rank that started it, and never spawns ranks.
bool IsDeathTestChild();

// `arg` quoted for a POSIX shell where it needs it ("a b" -> "'a b'").
std::string ShellQuote(const std::string& arg);

// What --gtest_filter= takes to run the test `test_name` (its full gtest
// name). gtest's filter has no escapes: ':' in a name (a typed test's, say)
// would split it, '-' would start the tests to leave out, '*' would match
// more; each becomes '?', which matches any one character, that one too.
std::string GtestFilterOf(const std::string& test_name);

// The command line that reruns exactly `test_name`: this binary with its own
// arguments, less the gtest flags of this run, plus the filter:
// "/path/to/bin --my_flag '--gtest_filter=Suite.Name/2ranks'".
// The DISTTEST_* variables of this run come first (DISTTEST_GPUS only with
// `keep_gpus`: a test on assigned GPUs names its own). With several tests,
// they run in gtest's order.
std::string RerunCommand(const std::string& test_name, bool keep_gpus = true);
std::string RerunCommand(const std::vector<std::string>& tests,
                         bool keep_gpus = true);

// The command line of this whole run, its DISTTEST_* variables, gtest's
// that choose and order the tests, and every argument as given but
// --gtest_output (the rerun does not write over the run's report): for an
// order of tests that no filter gives (gtest runs a filter's tests once
// each, in the order they were registered). With `seed`,
// --gtest_random_seed is that one.
std::string RunAgainCommand(std::optional<int> seed = std::nullopt);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_COMMAND_LINE_H_
