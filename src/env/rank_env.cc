// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/env/rank_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/knobs.h"
#include "env/text.h"

extern char** environ;

namespace disttest {
namespace {

const char* Require(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw ConfigError(
        fmt::format("environment variable {} is not set; a rank process needs "
                    "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT",
                    name));
  }
  return value;
}

// Whether `value` is written as a decimal number ("2.5", "1e3"): strtod
// also reads hexadecimal ("0x10", trial 13), "inf" and "nan", which no one
// means as seconds or as a factor.
bool Decimal(const char* value) {
  for (const char* c = value; *c != '\0'; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(*c)) && *c != '.' &&
        *c != 'e' && *c != 'E' && *c != '+' && *c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

int ParseIntVariable(const char* name, const char* value, int min, int max) {
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  // strtoll skips leading white space, which a trailing one is not: both
  // are refused, as the whole value must be the number.
  if (*value == '\0' || std::isspace(static_cast<unsigned char>(*value)) ||
      end == value || *end != '\0' || errno == ERANGE) {
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is not an integer", name, value));
  }
  if (parsed < min || parsed > max) {
    throw ConfigError(
        fmt::format("environment variable {}={} is out of range [{}, {}]", name,
                    value, min, max));
  }
  return static_cast<int>(parsed);
}

std::optional<std::chrono::milliseconds> SecondsVariable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double seconds = std::strtod(value, &end);
  if (!Decimal(value) || end == value || *end != '\0' || std::isnan(seconds) ||
      seconds <= 0) {
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is not a positive number of seconds",
        name, value));
  }
  constexpr double kMaxSeconds =
      std::chrono::duration<double>(kLongestTimeout).count();
  if (errno == ERANGE || !std::isfinite(seconds) || seconds > kMaxSeconds) {
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is too large: at most {:.0f} seconds "
        "(about 115 days)",
        name, value, kMaxSeconds));
  }
  return std::chrono::milliseconds(
      static_cast<long long>(std::ceil(seconds * 1000)));
}

std::chrono::milliseconds HeartbeatInterval() {
  // 0 turns it off, however it is written ("0", "0.0", "0e0").
  const char* value = std::getenv(env::kHeartbeat);
  if (value != nullptr && *value != '\0' && Decimal(value)) {
    char* end = nullptr;
    errno = 0;
    // (1e-400 is no 0: strtod's underflow, ERANGE, goes to the error.)
    if (std::strtod(value, &end) == 0 && end != value && *end == '\0' &&
        errno != ERANGE) {
      return std::chrono::milliseconds(0);
    }
  }
  const std::chrono::milliseconds every =
      SecondsVariable(env::kHeartbeat).value_or(std::chrono::seconds(5));
  // Shorter would print a line at every turn of the parent's poll loop
  // (trial 13: 1e-9).
  if (every < std::chrono::milliseconds(100)) {
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is too short: at least 0.1 seconds "
        "between progress lines, or 0 to turn them off",
        env::kHeartbeat, value));
  }
  return every;
}

}  // namespace disttest

// The sanitizers' runtimes, when the process has one (weak: null without).
extern "C" {
__attribute__((weak)) void __asan_init();
__attribute__((weak)) void __tsan_init();
__attribute__((weak)) void __msan_init();
}

namespace disttest {

double SlowBuildScale(std::string* why) {
  auto say = [why](const char* tool, double factor) {
    if (why != nullptr) *why = tool;
    return factor;
  };
  if (&__tsan_init != nullptr) return say("ThreadSanitizer", 5);
  if (&__msan_init != nullptr) return say("MemorySanitizer", 5);
  if (&__asan_init != nullptr) return say("AddressSanitizer", 3);
  // valgrind preloads its own libraries into the program.
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) {
    return say("valgrind", 20);
  }
  return say("", 1);
}

double TimeoutScale() {
  const char* value = std::getenv(env::kTimeoutScale);
  if (value == nullptr || *value == '\0') return SlowBuildScale();
  char* end = nullptr;
  const double scale = std::strtod(value, &end);
  if (!Decimal(value) || end == value || *end != '\0' || !(scale > 0) ||
      scale > 100) {
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is invalid: it must be a number "
        "greater than 0 and at most 100 (a factor for every disttest "
        "deadline)",
        env::kTimeoutScale, value));
  }
  return scale;
}

namespace {

double ScaleOrOne() {
  try {
    return TimeoutScale();
  } catch (const ConfigError&) {
    return SlowBuildScale();
  }
}

}  // namespace

std::string ScaleNote() {
  const double scale = ScaleOrOne();
  if (scale == 1) return "";
  const char* value = std::getenv(env::kTimeoutScale);
  std::string tool;
  SlowBuildScale(&tool);
  if (value == nullptr || *value == '\0') {
    return fmt::format(" (x{:g} under {}; set {} to change it)", scale, tool,
                       env::kTimeoutScale);
  }
  return fmt::format(" (x{:g}: {})", scale, env::kTimeoutScale);
}

std::chrono::milliseconds Scaled(std::chrono::milliseconds d) {
  const double scale = ScaleOrOne();
  if (scale == 1) return d;
  // "No limit" (milliseconds::max()) stays one.
  constexpr double kMax = static_cast<double>(kLongestTimeout.count());
  const double scaled = std::ceil(static_cast<double>(d.count()) * scale);
  return std::chrono::milliseconds(
      static_cast<long long>(std::min(scaled, kMax)));
}

std::chrono::milliseconds ScaledUp(std::chrono::milliseconds d) {
  return ScaleOrOne() < 1 ? d : Scaled(d);
}

bool CompareCallsWhileWaiting() {
  const char* value = std::getenv(env::kCompareCalls);
  if (value == nullptr || *value == '\0') return true;
  const std::string_view v(value);
  if (v == "0" || v == "1") return v == "1";
  throw ConfigError(fmt::format("{}=\"{}\" is invalid: it must be 0 or 1",
                                env::kCompareCalls, v));
}

std::optional<int> DebugRankVariable() {
  const char* value = std::getenv(env::kDebugRank);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return ParseIntVariable(env::kDebugRank, value, 0, kMaxWorldSize - 1);
}

RankEnv RankEnv::FromEnvironment() {
  RankEnv env;
  env.world_size = ParseIntVariable(env::kWorldSize, Require(env::kWorldSize),
                                    1, kMaxWorldSize);
  env.rank =
      ParseIntVariable(env::kRank, Require(env::kRank), 0, env.world_size - 1);
  // torchrun's name first, as DetectLauncherEnv reads them; an error names
  // the variable read (trial 11: LOCAL_WORLD_SIZE=abc was "LOCAL_SIZE").
  const char* local_name = env::kLocalWorldSize;
  const char* local_size = std::getenv(local_name);
  if (local_size == nullptr) {
    local_name = env::kLocalSize;
    local_size = std::getenv(local_name);
  }
  env.local_size =
      local_size == nullptr
          ? env.world_size
          : ParseIntVariable(local_name, local_size, 1, env.world_size);
  const char* local_rank = std::getenv(env::kLocalRank);
  env.local_rank = local_rank == nullptr
                       ? env.rank % env.local_size
                       : ParseIntVariable(env::kLocalRank, local_rank, 0,
                                          env.local_size - 1);
  env.master_addr = Require(env::kMasterAddr);
  env.master_port =
      ParseIntVariable(env::kMasterPort, Require(env::kMasterPort), 1, 65535);
  return env;
}

std::vector<std::pair<std::string, std::string>> RankEnv::Variables() const {
  return {{env::kMasterAddr, master_addr},
          {env::kMasterPort, std::to_string(master_port)},
          {env::kRank, std::to_string(rank)},
          {env::kLocalRank, std::to_string(local_rank)},
          {env::kWorldSize, std::to_string(world_size)},
          {env::kLocalSize, std::to_string(local_size)},
          {env::kLocalWorldSize, std::to_string(local_size)}};
}

std::string RankEnv::Label() const {
  return fmt::format("rank {}/{}", rank, world_size);
}

std::vector<std::string> ChildEnvironment(
    const RankEnv& rank,
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::set<std::string> replaced(std::begin(env::kRemovedFromChild),
                                 std::end(env::kRemovedFromChild));
  // "0" or "" is off (SetToOne), as for every switch; read in the parent
  // (the test fails on another value before its ranks start).
  if (!internal::SetToOne(env::kKeepNcclDebug)) {
    replaced.insert(env::kNcclDebug);
  }
  std::vector<std::pair<std::string, std::string>> added = rank.Variables();
  added.insert(added.end(), extra.begin(), extra.end());
  for (const auto& [name, value] : added) replaced.insert(name);

  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    std::string name =
        eq == nullptr ? std::string(*entry) : std::string(*entry, eq - *entry);
    if (replaced.count(name) == 0) result.emplace_back(*entry);
  }
  for (const auto& [name, value] : added) result.push_back(name + "=" + value);
  return result;
}

}  // namespace disttest
