// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Reading the text of environment variables: lists, numbers, and where the
// variables come from. Shared by the launcher, GPU and CTest parsers.
//
//   EnvLookup get = OrProcessEnvironment(lookup);  // a test's map, or getenv
//   for (std::string_view item : SplitOn(get("LIST"), ',')) ...
#ifndef DISTTEST_SRC_ENV_TEXT_H_
#define DISTTEST_SRC_ENV_TEXT_H_

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/env/rank_env.h"
#include "disttest/error.h"

namespace disttest::internal {

// `lookup`, or the process's environment when it is empty.
inline EnvLookup OrProcessEnvironment(const EnvLookup& lookup) {
  if (lookup) return lookup;
  return [](const char* name) -> const char* { return std::getenv(name); };
}

// "a,b,,c" -> "a", "b", "", "c"; an empty text is one empty item.
inline std::vector<std::string_view> SplitOn(std::string_view text,
                                             char separator) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    std::size_t at = text.find(separator, start);
    items.push_back(text.substr(start, at - start));
    if (at == std::string_view::npos) return items;
    start = at + 1;
  }
}

// Without leading and trailing white space.
inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// Whether the process's variable `name` is "1" (the switches that turn a
// feature off: DISTTEST_NO_REUSE, DISTTEST_NO_HOST_ARENA); unset, "" and
// "0" are off. Any other value throws ConfigError naming it ("true" would
// otherwise be read as off, and the run not be what it says).
inline bool SetToOne(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return false;
  const std::string_view v(value);
  if (v == "1") return true;
  if (v.empty() || v == "0") return false;
  throw ConfigError(fmt::format(
      "environment variable {}='{}': expected 1 (on) or 0 (off)", name, v));
}

// Non-empty and decimal digits only.
inline bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// "0-2, 5, 7-9": ascending rank numbers as ranges.
inline std::string RankNumbers(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) text += ", ";
    text += j == i ? fmt::format("{}", ranks[i])
                   : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return text;
}

// "rank 3", "ranks 0-2, 5, 7-9".
inline std::string RanksText(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + RankNumbers(ranks);
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_ENV_TEXT_H_
