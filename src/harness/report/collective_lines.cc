// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The grouping of the collective reports' lines (collective_lines.h): the
// durations as ranges and the words that agree with one rank or several.
#include "harness/report/collective_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "env/text.h"

namespace disttest::internal {
namespace {

std::string Duration(std::int64_t ns) {
  if (ns < 0) ns = 0;
  if (ns < 1000000000) return fmt::format("{} ms", ns / 1000000);
  return fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9);
}

// "412 ms", "29.8-30.0 s": the group's durations.
std::string Durations(std::int64_t lo, std::int64_t hi) {
  const std::string a = Duration(lo), b = Duration(hi);
  if (a == b) return a;
  if (a.ends_with(" s") && b.ends_with(" s")) {
    return a.substr(0, a.size() - 2) + "-" + b;
  }
  return a + " to " + b;
}

// The words that agree with a subject of one rank or several.
std::string Agree(std::string text, bool plural) {
  static const std::pair<const char*, const char*> kWords[] = {
      {"is", "are"}, {"its", "their"}, {"it", "they"}, {"has", "have"}};
  for (const auto& [one, many] : kWords) {
    const std::string mark = fmt::format("{{{}}}", one);
    for (std::size_t at = text.find(mark); at != std::string::npos;
         at = text.find(mark)) {
      text.replace(at, mark.size(), plural ? many : one);
    }
  }
  return text;
}

}  // namespace

std::vector<std::string> Grouped(const std::vector<int>& ranks,
                                 const std::vector<Line>& lines) {
  struct Group {
    const Line* first;
    std::vector<int> ranks;
    std::vector<std::int64_t> lo, hi;
  };
  std::vector<Group> groups;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.first->pattern == lines[i].pattern;
    });
    if (same == groups.end()) {
      groups.push_back({&lines[i], {ranks[i]}, lines[i].times, lines[i].times});
      continue;
    }
    same->ranks.push_back(ranks[i]);
    for (std::size_t t = 0; t < lines[i].times.size(); ++t) {
      same->lo[t] = std::min(same->lo[t], lines[i].times[t]);
      same->hi[t] = std::max(same->hi[t], lines[i].times[t]);
    }
  }
  std::vector<std::string> out;
  for (const Group& g : groups) {
    const bool plural = g.ranks.size() > 1;
    std::string text = Agree(g.first->pattern, plural);
    std::size_t t = 0;
    for (std::size_t at = text.find(kTime); at != std::string::npos;
         at = text.find(kTime)) {
      // A mark beyond the times came in a name (a file's, from another
      // host): it is dropped.
      text.replace(at, 1, t < g.lo.size() ? Durations(g.lo[t], g.hi[t]) : "");
      ++t;
    }
    std::string subject = RanksText(g.ranks);
    const bool ranged =
        RankNumbers(g.ranks).find_first_of(",-") != std::string::npos;
    if (plural && ranged) subject += fmt::format(" ({} ranks)", g.ranks.size());
    out.push_back(fmt::format("  {} {}", subject, text));
  }
  return out;
}

}  // namespace disttest::internal
