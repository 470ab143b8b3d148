// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string_view>

#include "disttest/env/names.h"
#include "env/internal_names.h"
#include "env/knobs.h"

namespace disttest::internal {
namespace {

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() &&
      arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                            "XYZ0123456789_-./=:,+@%") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::vector<std::string> ReadCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::size_t start = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  return args;
}

bool IsParentOnlyFlag(const std::string& arg) {
  static const char* const kFlags[] = {
      "--gtest_filter",           "--gtest_output",
      "--gtest_repeat",           "--gtest_shuffle",
      "--gtest_random_seed",      "--gtest_list_tests",
      "--gtest_fail_fast",        "--gtest_brief",
      "--gtest_stream_result_to", "--gtest_also_run_disabled_tests",
  };
  for (const char* flag : kFlags) {
    if (StartsWith(arg, flag)) return true;
  }
  return false;
}

bool IsDeathTestChild() {
  // Read from the command line, not gtest's flag: launched-mode detection
  // asks during static initialisation, before gtest parses its flags.
  static const bool child = [] {
    for (const std::string& arg : ReadCommandLine()) {
      if (StartsWith(arg, "--gtest_internal_run_death_test")) return true;
    }
    return false;
  }();
  return child;
}

std::string GtestFilterOf(const std::string& test_name) {
  std::string filter = test_name;
  std::replace_if(
      filter.begin(), filter.end(),
      [](char c) { return c == ':' || c == '-' || c == '*'; }, '?');
  return filter;
}

std::string RerunCommand(const std::string& test_name, bool keep_gpus) {
  return RerunCommand(std::vector<std::string>{test_name}, keep_gpus);
}

namespace {

// This run's command: the DISTTEST_* variables that change what it does
// (DISTTEST_GPUS only with `keep_gpus`), then this binary and those of its
// arguments that `keep` keeps.
template <typename Keep>
std::string CommandOfThisRun(bool keep_gpus, Keep keep) {
  std::vector<std::string> args = ReadCommandLine();
  // The DISTTEST_* variables of this run change what the test does
  // (DISTTEST_NO_HOST_ARENA, DISTTEST_TIMEOUT, ...): the rerun keeps them.
  std::vector<std::string> variables;
  // The variables that change what a test run does; not the build's
  // (DISTTEST_SANITIZE), not DISTTEST_DEBUG_RANK (a rerun is not always at
  // a debugger).
  std::vector<const char*> kept = {
      env::kLaunch,       env::kMpiexecFlags,    env::kTimeout,
      env::kHeartbeat,    env::kLogDir,          env::kTrace,
      env::kLauncher,     env::kRequireGpus,     env::kShareGpus,
      env::kNoReuse,      env::kNoZygote,        env::kNoKeeper,
      env::kNoHostArena,  env::kKeepNcclDebug,   env::kCompareCalls,
      env::kTimeoutScale, "DISTTEST_MASTER_PORT"};
  if (keep_gpus) kept.push_back(env::kGpus);
  for (const char* name : kept) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    // A factor of 1 (a test runner's, as disttest's own self-tests set it)
    // changes at most a slow build's deadlines, not what the test does.
    if (std::string_view(name) == env::kTimeoutScale &&
        std::string_view(value) == "1") {
      continue;
    }
    variables.push_back(std::string(name) + "=" + ShellQuote(value));
  }
  std::sort(variables.begin(), variables.end());
  std::string command;
  for (const std::string& v : variables) command += v + " ";
  command += args.empty() ? "<test binary>" : ShellQuote(args[0]);
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (keep(args[i])) command += " " + ShellQuote(args[i]);
  }
  return command;
}

}  // namespace

std::string RerunCommand(const std::vector<std::string>& tests,
                         bool keep_gpus) {
  std::string command = CommandOfThisRun(
      keep_gpus, [](const std::string& arg) { return !IsParentOnlyFlag(arg); });
  std::string filter;
  bool disabled = false;
  for (const std::string& test : tests) {
    filter += (filter.empty() ? "" : ":") + GtestFilterOf(test);
    disabled |= test.find("DISABLED_") != std::string::npos;
  }
  command += " " + ShellQuote("--gtest_filter=" + filter);
  if (disabled) {
    command += " --gtest_also_run_disabled_tests";
  }
  return command;
}

std::string RunAgainCommand(std::optional<int> seed) {
  // gtest's flags that came as variables: what runs, and in which order.
  std::string gtest;
  for (const char* name :
       {"GTEST_ALSO_RUN_DISABLED_TESTS", "GTEST_FILTER", "GTEST_REPEAT",
        "GTEST_SHARD_INDEX", "GTEST_SHUFFLE", "GTEST_TOTAL_SHARDS"}) {
    if (const char* value = std::getenv(name)) {
      gtest += fmt::format("{}={} ", name, ShellQuote(value));
    }
  }
  std::string command =
      gtest + CommandOfThisRun(true, [&](const std::string& arg) {
        // Not over the run's own report.
        return !StartsWith(arg, "--gtest_output") &&
               !(seed && StartsWith(arg, "--gtest_random_seed"));
      });
  if (seed) command += fmt::format(" --gtest_random_seed={}", *seed);
  return command;
}

}  // namespace disttest::internal
