// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankEnv: who this process is in the job, and where the store is.
//
//   disttest::RankEnv me = disttest::RankEnv::FromEnvironment();
//   // me.rank, me.world_size, me.local_rank, me.local_size,
//   // me.master_addr, me.master_port
//
// FromEnvironment() reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_SIZE or LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). A missing or
// malformed variable is a ConfigError that names it and the value given:
//   "environment variable RANK='x1' is not an integer"
//   "environment variable RANK=4 is out of range [0, 3]"
// Nothing here knows about processes or gtest.
#ifndef DISTTEST_ENV_RANK_ENV_H_
#define DISTTEST_ENV_RANK_ENV_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace disttest {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;

  // Reads the rank environment of this process (see the header comment).
  static RankEnv FromEnvironment();

  // The variables that describe this rank, as (name, value) pairs.
  std::vector<std::pair<std::string, std::string>> Variables() const;

  // "rank 1/4" style label used in messages.
  std::string Label() const;
};

// Reads a variable; nullptr when unset. An empty one reads the process's
// environment (std::getenv); tests pass a map instead.
using EnvLookup = std::function<const char*(const char*)>;

// Largest world size disttest accepts.
inline constexpr int kMaxWorldSize = 1024;

// Whether `n` ranks is a world size disttest accepts: [1, kMaxWorldSize].
constexpr bool ValidWorldSize(int n) { return n >= 1 && n <= kMaxWorldSize; }

// Parses the integer value of environment variable `name`; throws ConfigError
// naming the variable and the value when it is not an integer in [min, max].
int ParseIntVariable(const char* name, const char* value, int min, int max);

// Reads a duration in seconds (integer or decimal, > 0) from `name`; nullopt
// when unset or empty; ConfigError when malformed:
//   "environment variable DISTTEST_TIMEOUT='abc' is not a positive number of
//   seconds"
std::optional<std::chrono::milliseconds> SecondsVariable(const char* name);

}  // namespace disttest

#endif  // DISTTEST_ENV_RANK_ENV_H_
