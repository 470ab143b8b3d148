// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The harness's reading of its own knobs, and the environment it writes for
// a rank process: env's, but no test author's business.
//
//   std::optional<int> debug = DebugRankVariable();      // DISTTEST_DEBUG_RANK
//   std::vector<std::string> envp = ChildEnvironment(rank, {{"K", "v"}});
#ifndef DISTTEST_SRC_ENV_KNOBS_H_
#define DISTTEST_SRC_ENV_KNOBS_H_

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "disttest/env/rank_env.h"

namespace disttest {

// The longest deadline disttest keeps: 10^7 s, about 115 days, far beyond
// any test and small enough that a time point of now plus it never
// overflows. Longer timeouts (milliseconds::max() for "none") are cut to
// it; DISTTEST_TIMEOUT and its kin refuse more, naming it.
inline constexpr std::chrono::milliseconds kLongestTimeout =
    std::chrono::seconds(10'000'000);

// DISTTEST_DEBUG_RANK as a rank number; nullopt when unset or empty;
// ConfigError naming the value when it is not an integer in [0, 1023].
std::optional<int> DebugRankVariable();

// DISTTEST_HEARTBEAT in seconds: 5 s when unset, 0 (no progress lines) for
// "0"; ConfigError when malformed.
std::chrono::milliseconds HeartbeatInterval();

// DISTTEST_TIMEOUT_SCALE: the factor for every disttest deadline; when
// unset or empty, the slow build's own (SlowBuildScale()). ConfigError
// naming the value when it is not a number in (0, 100].
double TimeoutScale();
// 3 in a process with AddressSanitizer, 5 with ThreadSanitizer or
// MemorySanitizer, 20 under valgrind, 1 otherwise; `why` (if given) names
// the tool.
double SlowBuildScale(std::string* why = nullptr);
// `d` times TimeoutScale() (a malformed value counts as unset here: the
// test's options report it).
std::chrono::milliseconds Scaled(std::chrono::milliseconds d);
// The same, but never shorter than `d`: for bounds tied to fixed periods
// (a launched rank's heartbeat every 500 ms, its report waits).
std::chrono::milliseconds ScaledUp(std::chrono::milliseconds d);
// For a message about a scaled deadline: "" at 1, else " (x2:
// DISTTEST_TIMEOUT_SCALE)" or " (x3 under AddressSanitizer; set
// DISTTEST_TIMEOUT_SCALE to change it)".
std::string ScaleNote();

// DISTTEST_COMPARE_CALLS: false for "0", true for "1", unset or empty;
// ConfigError naming the value otherwise.
bool CompareCallsWhileWaiting();

// The environment of a rank process: this process's environment, minus the
// variables in env::kRemovedFromChild (and NCCL_DEBUG unless
// DISTTEST_KEEP_NCCL_DEBUG is set), plus `rank`'s variables and `extra`.
// Entries are "NAME=value".
std::vector<std::string> ChildEnvironment(
    const RankEnv& rank,
    const std::vector<std::pair<std::string, std::string>>& extra);

}  // namespace disttest

#endif  // DISTTEST_SRC_ENV_KNOBS_H_
