// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/failure_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "comm/host_arena.h"
#include "env/text.h"
#include "harness/report/collective_report.h"
#include "harness/report/stack_tree.h"

namespace disttest::internal {

std::string GroupLabel(const TestSpec& spec, const std::vector<int>& ranks) {
  if (ranks.size() == 1) return RankLabel(spec, ranks.front());
  return fmt::format("[{}{} of {}]",
                     spec.fixture.empty() ? "" : spec.fixture + " ",
                     RanksText(ranks), spec.world_size);
}

namespace {

// `text` without the rank's own label, which a rank's messages may carry
// ("... threw disttest::CommError: [rank 3/8] barrier failed: ..."): the
// same failure of several ranks reads the same.
std::string WithoutOwnLabel(const TestSpec& spec, int rank, std::string text) {
  const std::string label = RankLabel(spec, rank) + " ";
  for (std::size_t at = text.find(label); at != std::string::npos;
       at = text.find(label, at)) {
    text.erase(at, label.size());
  }
  return text;
}

// Failures alike but for the rank: one group of ranks per text.
struct FailureGroup {
  Finding::Kind kind;
  std::string file;
  int line;
  std::string key;         // The text without the rank's label.
  std::string first_text;  // The first rank's own text.
  std::vector<int> ranks;
  std::optional<std::chrono::steady_clock::time_point> at;  // Earliest.
  // Every item follows from another rank's failure: a group with one of
  // the cause's own is never put after what it caused.
  bool follows = false;
};

// For texts of the same number of lines, each line's place where the texts
// start to differ (npos: they do not), cut at a token's start; nullopt when
// they have different numbers of lines, or differ in no line or in most of
// them (mostly different texts are no table).
std::optional<std::vector<std::size_t>> WhereLinesDiffer(
    const std::vector<std::vector<std::string>>& lines) {
  const std::size_t n = lines.front().size();
  if (std::any_of(lines.begin(), lines.end(),
                  [&](const auto& l) { return l.size() != n; })) {
    return std::nullopt;
  }
  std::vector<std::size_t> differs(n, std::string::npos);
  std::size_t varying = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::string& a = lines.front()[k];
    std::size_t common = std::string::npos;
    for (const auto& l : lines) {
      if (l[k] == a) continue;
      std::size_t c = 0;
      while (c < a.size() && c < l[k].size() && a[c] == l[k][c]) ++c;
      common = std::min(common, c);
    }
    // Cut at a token's start, not in its middle ("Which is: 0.12" of
    // 0.1234 and 0.1256).
    while (common != std::string::npos && common > 0 &&
           std::string_view(" :=,([{").find(a[common - 1]) ==
               std::string_view::npos) {
      --common;
    }
    differs[k] = common;
    if (common != std::string::npos) ++varying;
  }
  if (varying == 0 || 2 * varying > n) return std::nullopt;
  return differs;
}

// The groups `members` (ranks with texts at one line whose `lines` differ
// at `differs`) as one: the lines they share, each differing one cut where
// they differ, and a row per text: "  rank 3: 3".
FailureGroup TableOf(const std::vector<FailureGroup>& groups,
                     const std::vector<std::size_t>& members,
                     const std::vector<std::vector<std::string>>& lines,
                     const std::vector<std::size_t>& differs) {
  constexpr std::size_t kMaxRows = 128;
  const std::size_t n = differs.size();
  std::string text;
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0) text += '\n';
    const std::string& a = lines.front()[k];
    text += differs[k] == std::string::npos
                ? a
                : a.substr(0, differs[k]) + "(each rank's, below)";
  }
  // The rows, by first rank.
  std::vector<std::size_t> order(members.size());
  for (std::size_t m = 0; m < members.size(); ++m) order[m] = m;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return groups[members[x]].ranks.front() < groups[members[y]].ranks.front();
  });
  FailureGroup all = groups[members.front()];
  all.ranks.clear();
  std::size_t rows = 0;
  for (const std::size_t m : order) {
    const FailureGroup& g = groups[members[m]];
    all.ranks.insert(all.ranks.end(), g.ranks.begin(), g.ranks.end());
    if (g.at && (!all.at || *g.at < *all.at)) all.at = g.at;
    if (++rows > kMaxRows) continue;
    std::string row;
    for (std::size_t k = 0; k < n; ++k) {
      if (differs[k] == std::string::npos) continue;
      if (!row.empty()) row += "; ";
      row += lines[m][k].substr(differs[k]);
    }
    text += fmt::format("\n  {}: {}", RanksText(g.ranks), row);
  }
  if (rows > kMaxRows) {
    text += fmt::format("\n  ... and {} more", rows - kMaxRows);
  }
  std::sort(all.ranks.begin(), all.ranks.end());
  all.key = text;
  all.first_text = text;
  return all;
}

// Ranks that failed at one line with texts that differ only in some of
// their lines (each rank's own value: `EXPECT_EQ(rank(), 0)` at 64 ranks)
// become one group: the lines they share, each differing line cut where
// they differ ("    Which is: (each rank's, below)"), and a table of what
// differs, a row per text: "  rank 3: 3". Three texts or more, each of
// other ranks; texts of other shapes stay as they are.
void MergeRankSpecific(std::vector<FailureGroup>& groups) {
  constexpr std::size_t kMinTexts = 3;
  std::map<std::tuple<int, std::string, int, bool>, std::vector<std::size_t>>
      at_line;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const FailureGroup& g = groups[i];
    at_line[{static_cast<int>(g.kind), g.file, g.line, g.follows}].push_back(i);
  }
  std::vector<bool> merged_away(groups.size(), false);
  for (const auto& [where, members] : at_line) {
    if (members.size() < kMinTexts) continue;
    // Each rank's own value: no rank in two of them (a rank that fails at
    // one line again and again keeps each failure, as gtest does).
    std::set<int> ranks;
    std::size_t total = 0;
    for (const std::size_t i : members) {
      ranks.insert(groups[i].ranks.begin(), groups[i].ranks.end());
      total += groups[i].ranks.size();
    }
    if (ranks.size() != total) continue;
    std::vector<std::vector<std::string>> lines;
    for (const std::size_t i : members) {
      std::vector<std::string> l;
      for (std::string_view part : SplitOn(groups[i].key, '\n')) {
        l.emplace_back(part);
      }
      lines.push_back(std::move(l));
    }
    const std::optional<std::vector<std::size_t>> differs =
        WhereLinesDiffer(lines);
    if (!differs) continue;
    groups[members.front()] = TableOf(groups, members, lines, *differs);
    for (std::size_t m = 1; m < members.size(); ++m) {
      merged_away[members[m]] = true;
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (merged_away[i]) continue;
    if (kept != i) groups[kept] = std::move(groups[i]);
    ++kept;
  }
  groups.resize(kept);
}

// Each failure (kind, file, line and text without the rank's label) once,
// with its ranks; properties go to `out` as they are.
std::vector<FailureGroup> GroupAlike(const TestSpec& spec,
                                     std::vector<FailureItem> items,
                                     std::vector<Finding>* out) {
  std::vector<FailureGroup> groups;
  // The groups of each failure (kind, file, line and text without the
  // rank's label), in the order made: a rank's n-th such failure joins the
  // n-th group, so a failure that every rank hits twice is two groups of
  // every rank. Found by hash, not by a search of every group: 100,000
  // distinct failures cost 100,000 look-ups, not 5 * 10^9 comparisons.
  std::unordered_map<std::string, std::vector<std::size_t>> groups_of;
  std::unordered_map<std::string, std::size_t> seen;  // This rank's, by id.
  groups_of.reserve(items.size());
  groups.reserve(items.size());
  int seen_rank = -1;
  for (FailureItem& item : items) {
    if (item.kind == Finding::Kind::kProperty) {
      out->push_back(
          {item.kind, item.file, item.line, std::move(item.text), item.value});
      continue;
    }
    std::string key = WithoutOwnLabel(spec, item.rank, item.text);
    std::string id = fmt::format("{}\n{}\n{}\n{}", static_cast<int>(item.kind),
                                 item.file, item.line, key);
    if (item.rank != seen_rank) {
      seen.clear();
      seen_rank = item.rank;
    }
    std::vector<std::size_t>& same = groups_of[id];
    std::size_t n = seen[id]++;
    // The items come rank by rank; should one come back to a rank, it
    // joins the first group that does not end with it, as before.
    while (n < same.size() && groups[same[n]].ranks.back() == item.rank) ++n;
    if (n == same.size()) {
      const bool follows = item.follows;
      same.push_back(groups.size());
      groups.push_back({item.kind,
                        item.file,
                        item.line,
                        std::move(key),
                        std::move(item.text),
                        {item.rank},
                        item.at,
                        follows});
      continue;
    }
    FailureGroup& group = groups[same[n]];
    group.ranks.push_back(item.rank);
    group.follows = group.follows && item.follows;
    if (item.at && (!group.at || *item.at < *group.at)) group.at = item.at;
  }
  return groups;
}

}  // namespace

void AddFailures(const TestSpec& spec, std::vector<FailureItem> items,
                 std::vector<Finding>* out) {
  // Root causes first, in the order they came (unknown times last), then
  // what followed from them.
  const auto rank_of = [](const FailureGroup& g) {
    return std::make_pair(g.follows, !g.at.has_value());
  };
  std::vector<FailureGroup> groups = GroupAlike(spec, std::move(items), out);
  MergeRankSpecific(groups);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const FailureGroup& a, const FailureGroup& b) {
                     if (rank_of(a) != rank_of(b))
                       return rank_of(a) < rank_of(b);
                     return a.at && b.at && *a.at < *b.at;
                   });
  // The first is marked when it is known to be first: what came next
  // followed from it, or came later than the parent's poll tick could blur;
  // and when a rank not among the first's failed too: the same ranks (or
  // some of them) failing at one line and then at the next is the
  // program's order, which the lines already show.
  constexpr std::chrono::milliseconds kSameMoment(10);
  for (FailureGroup& g : groups) std::sort(g.ranks.begin(), g.ranks.end());
  const bool others =
      std::any_of(groups.begin(), groups.end(), [&](const FailureGroup& g) {
        return !std::includes(groups.front().ranks.begin(),
                              groups.front().ranks.end(), g.ranks.begin(),
                              g.ranks.end());
      });
  const bool ordered =
      groups.size() > 1 && others && groups.front().at &&
      !groups.front().follows &&
      (groups[1].follows ||
       (groups[1].at && *groups[1].at - *groups.front().at >= kSameMoment));
  for (std::size_t i = 0; i < groups.size(); ++i) {
    FailureGroup& g = groups[i];
    const std::string when = ordered && i == 0 ? "(first failure) " : "";
    const std::string text = g.ranks.size() == 1 ? g.first_text : g.key;
    out->push_back(
        {g.kind,
         g.file,
         g.line,
         fmt::format("{} {}{}", GroupLabel(spec, g.ranks), when, text),
         {}});
  }
}

}  // namespace disttest::internal
