// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/verdict.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "comm/host_arena.h"
#include "env/text.h"
#include "harness/report/collective_report.h"
#include "harness/report/stack_tree.h"

namespace disttest::internal {

namespace {

// Names the fixture in findings that concern all of its ranks.
std::string Whose(const TestSpec& spec) {
  return spec.fixture.empty() ? std::string() : spec.fixture + ": ";
}

// What a rank's exit status says when its final report never came.
std::string EndWithoutReport(const RankOutcome& o) {
  switch (o.exit_code()) {
    case kExitHarnessError:
      return fmt::format(
          "{}: disttest could not set the rank up; its output above says why",
          o.str());
    case kExitExecFailed:
      return fmt::format("{}: the test binary could not be re-executed",
                         o.str());
    case kExitFailed:
    case kExitSkipped:
      return fmt::format("{} (it {}), but its report was lost", o.str(),
                         o.exit_code() == kExitFailed ? "failed" : "skipped");
    default:
      return fmt::format("{} before the test body finished", o.str());
  }
}

// Whether one of the rank's own failures says `text` (a sanitizer report it
// found in itself: LeakSanitizer's, after its body).
bool Mentions(const RankReport& r, const std::string& text) {
  for (const RankMessage& m : r.results) {
    if ((m.kind == RankMessage::Kind::kFatalFailure ||
         m.kind == RankMessage::Kind::kNonFatalFailure) &&
        m.message.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// A rank whose verdict is "failed" but none of whose failures arrived (its
// queue was full or broken) must still fail the test.
std::optional<std::string> LostFailures(const RankReport& r) {
  if (*r.done == RankVerdict::kFailed && !ReportedAFailure(r)) {
    return std::string(
        "reported that it failed, but its failure messages were lost; its "
        "output above may say why");
  }
  return std::nullopt;
}

// Whether this rank's stack can go in the merged tree of the stuck ranks'
// stacks: it was stuck, and its stack has frames.
bool Stuck(const RankReport& r) {
  if (r.stack.empty() || !r.not_started.empty()) return false;
  // Only the ranks whose failure shows their stack (AbnormalEnd): not one
  // that finished while the stacks were taken and is judged by its verdict.
  const bool overran = !r.overran.empty() && r.killed_because.empty();
  const bool killed = !r.killed_because.empty() &&
                      !((r.killed_after_done || r.parked) && r.done);
  return (overran || killed) && !ParseStacks(r.stack).empty();
}

// `message`, then where the rank was when its stack was taken.
std::string WithStack(const RankReport& r, std::string message, bool in_tree) {
  if (in_tree) {
    message += "; where it was: in the stacks below";
  } else if (!r.stack.empty()) {
    // Enough to see where it was; a deep stack is cut, not the verdict.
    constexpr std::size_t kMaxStack = 16 * 1024;
    message += fmt::format("; it was here:\n{}", r.stack.substr(0, kMaxStack));
    if (r.stack.size() > kMaxStack) message += "\n... (stack cut)";
  }
  return message;
}

// How a rank ended when that is itself a failure; nullopt when it ended the
// way the harness ends a rank that ran its body to the end.
std::optional<std::string> AbnormalEnd(const RankReport& r, bool in_tree) {
  if (!r.not_started.empty()) {
    return fmt::format("was not started: {}", r.not_started);
  }
  // The deadline is decided when it passes: a rank that finished only while
  // its stack was being taken did not finish in time.
  if (!r.overran.empty() && r.killed_because.empty()) {
    return WithStack(
        r,
        fmt::format("did not finish in time: {}; it ended by itself only "
                    "while disttest took the stacks",
                    r.overran),
        in_tree);
  }
  if (EndedAsExpected(r)) return std::nullopt;
  // Expected to end before its verdict, by its own hand or a peer's: any
  // other end but disttest's kill (which says why itself) is a failure.
  if (r.expected_end && r.killed_because.empty()) {
    std::string actual;
    if (r.done) {
      actual = fmt::format("it finished the test ({})", NameOf(*r.done));
      if (r.outcome && !r.killed_after_done && !r.parked) {
        actual += " and " + r.outcome->str();
      }
    } else if (r.outcome) {
      actual = (r.outcome->signaled() ? "it was " : "it ") + r.outcome->str();
    } else {
      actual = "how it ended is unknown";
    }
    return fmt::format(
        "was expected to {} (ExpectRankToEnd in rank {}), but {}",
        r.expected_end->str(), r.expected_end->declared_by, actual);
  }
  if ((r.killed_after_done || r.parked) && r.done) return LostFailures(r);
  if (!r.killed_because.empty()) {
    return WithStack(
        r, fmt::format("was killed by disttest: {}", r.killed_because),
        in_tree);
  }
  if (!r.outcome) return std::string("ended, but how is unknown");
  const RankOutcome& o = *r.outcome;
  if (o.signaled()) return o.str();
  if (!r.done) {
    std::string end = EndWithoutReport(o);
    if (r.ledger && r.ledger->phase() == RankPhase::kCheckingLeaks) {
      // The check died: it could not stop the rank's threads (a debugger
      // or tracer holds one), and what it wrote went into the report file
      // disttest reads back.
      end +=
          "; it ended in LeakSanitizer's leak check after its body (the "
          "check itself failed, as when a debugger or tracer holds one of "
          "the rank's threads)";
    }
    return end;
  }
  if (o.exit_code() != ExitCodeOf(*r.done)) {
    return fmt::format("{} after reporting that it {}", o.str(),
                       NameOf(*r.done));
  }
  return LostFailures(r);
}

// One failure (or property) of one rank, before the ranks' are grouped.
struct Item {
  Finding::Kind kind;
  std::string file;
  int line = 0;
  int rank = 0;
  std::string text;   // Without the "[rank r/N] " label.
  std::string value;  // A property's value.
  std::optional<std::chrono::steady_clock::time_point> at;
};

// `in_tree`: the rank's stack is in the merged tree, not in its failure.
void AddRankResults(const TestSpec& spec, const RankReport& r, bool in_tree,
                    std::vector<Item>* out) {
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const RankMessage& m = r.results[i];
    Item item;
    item.rank = r.rank;
    item.file = m.file.empty() ? spec.file : m.file;
    item.line = m.file.empty() || m.line < 0 ? spec.line : m.line;
    item.text = m.message;
    if (i < r.received.size()) item.at = r.received[i];
    if (m.kind == RankMessage::Kind::kFatalFailure) {
      item.kind = Finding::Kind::kFatalFailure;
    } else if (m.kind == RankMessage::Kind::kNonFatalFailure) {
      item.kind = Finding::Kind::kFailure;
    } else if (m.kind == RankMessage::Kind::kProperty) {
      // Per rank in the XML: "rank1.key".
      const std::size_t nul = m.message.find('\0');
      item.kind = Finding::Kind::kProperty;
      item.text = fmt::format("rank{}.{}", r.rank, m.message.substr(0, nul));
      item.value = nul == std::string::npos ? "" : m.message.substr(nul + 1);
    } else {
      continue;  // Skips and successes are judged below.
    }
    out->push_back(std::move(item));
  }
  for (const std::string& e : r.channel_errors) {
    out->push_back({Finding::Kind::kFailure,
                    spec.file,
                    spec.line,
                    r.rank,
                    e,
                    {},
                    r.ended_at});
  }
  std::optional<std::string> end = AbnormalEnd(r, in_tree);
  if (r.sanitizer && !Mentions(r, r.sanitizer->headline)) {
    std::string text = r.sanitizer->str();
    // An exit that follows the report (ASan's, UBSan's halt) is its
    // consequence: one failure, not two.
    if (end && r.outcome && !r.outcome->signaled() &&
        r.killed_because.empty() && r.overran.empty()) {
      text += fmt::format("\n  then the rank {}", *end);
      end.reset();
    }
    out->push_back({Finding::Kind::kFatalFailure,
                    spec.file,
                    spec.line,
                    r.rank,
                    std::move(text),
                    {},
                    r.sanitizer->at ? r.sanitizer->at : r.ended_at});
  }
  if (end) {
    out->push_back({Finding::Kind::kFatalFailure,
                    spec.file,
                    spec.line,
                    r.rank,
                    *end,
                    {},
                    r.ended_at});
  }
}

// "[rank 3/4]", "[ranks 0-2, 5 of 8]" (with the fixture's name, if any).
std::string GroupLabel(const TestSpec& spec, const std::vector<int>& ranks) {
  if (ranks.size() == 1) return RankLabel(spec, ranks.front());
  return fmt::format("[{}{} of {}]",
                     spec.fixture.empty() ? "" : spec.fixture + " ",
                     RanksText(ranks), spec.world_size);
}

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
  bool follows = false;  // FollowsFromAnother(key).
};

// Ranks that failed at one line with texts that differ only in some of
// their lines (each rank's own value: `EXPECT_EQ(rank(), 0)` at 64 ranks)
// become one group: the lines they share, each differing line cut where
// they differ ("    Which is: (each rank's, below)"), and a table of what
// differs, a row per text: "  rank 3: 3". Three texts or more, each of
// other ranks; texts of other shapes stay as they are.
void MergeRankSpecific(std::vector<FailureGroup>& groups) {
  constexpr std::size_t kMinTexts = 3;
  constexpr std::size_t kMaxRows = 128;
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
    const std::size_t n = lines.front().size();
    if (std::any_of(lines.begin(), lines.end(),
                    [&](const auto& l) { return l.size() != n; })) {
      continue;
    }
    // Each line: where its texts start to differ (npos: they do not).
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
    // Mostly different texts are no table.
    if (varying == 0 || 2 * varying > n) continue;
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
      return groups[members[x]].ranks.front() <
             groups[members[y]].ranks.front();
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
    groups[members.front()] = std::move(all);
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

// The failures of every rank: identical ones once with their ranks, in the
// order they came where that is known, the first marked as the first.
void AddFailures(const TestSpec& spec, std::vector<Item> items,
                 std::vector<Finding>* out) {
  std::vector<FailureGroup> groups;
  // Root causes first, in the order they came (unknown times last), then
  // what followed from them.
  const auto rank_of = [](const FailureGroup& g) {
    return std::make_pair(g.follows, !g.at.has_value());
  };
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
  for (Item& item : items) {
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
      const bool follows = FollowsFromAnother(key);
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
    if (item.at && (!group.at || *item.at < *group.at)) group.at = item.at;
  }
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

void JudgeSkips(const TestSpec& spec, const std::vector<RankReport>& ranks,
                std::vector<Finding>* out) {
  // The skipped ranks grouped by their reason, in order of their first rank.
  struct Reason {
    const RankMessage* skip;  // Null: the rank skipped without a message.
    std::vector<int> ranks;
  };
  std::vector<Reason> reasons;
  std::vector<int> skipped;
  for (const RankReport& r : ranks) {
    if (r.done != RankVerdict::kSkipped) continue;
    skipped.push_back(r.rank);
    const RankMessage* skip = FirstSkip(r);
    const std::string why = skip != nullptr ? skip->message : std::string();
    auto same = std::find_if(reasons.begin(), reasons.end(), [&](auto& g) {
      return (g.skip != nullptr ? g.skip->message : std::string()) == why;
    });
    if (same == reasons.end()) {
      reasons.push_back({skip, {r.rank}});
    } else {
      same->ranks.push_back(r.rank);
    }
  }
  if (skipped.empty()) return;
  const RankMessage* first = reasons.front().skip;
  std::string file =
      first != nullptr && !first->file.empty() ? first->file : spec.file;
  int line = first != nullptr && first->line >= 0 ? first->line : spec.line;
  const auto why = [](const Reason& g, bool quoted) {
    if (g.skip == nullptr || g.skip->message.empty()) {
      return std::string("no message");
    }
    return quoted ? "\"" + g.skip->message + "\"" : g.skip->message;
  };
  // One reason: itself; several: each with its ranks.
  const auto reasons_text = [&](bool quoted) {
    if (reasons.size() == 1) return why(reasons.front(), quoted);
    std::string text;
    for (const Reason& g : reasons) {
      if (!text.empty()) text += "; ";
      text += fmt::format("{}: {}", RanksText(g.ranks), why(g, quoted));
    }
    return text;
  };
  if (static_cast<int>(skipped.size()) == spec.world_size) {
    out->push_back(
        {Finding::Kind::kSkip,
         file,
         line,
         fmt::format(
             "{}all {} ranks skipped: {}", Whose(spec), spec.world_size,
             reasons.size() == 1 && (first == nullptr || first->message.empty())
                 ? std::string()
                 : reasons_text(false)),
         {}});
    return;
  }
  std::string which = fmt::format(
      "{}{} {} of {} skipped ({}) while the other ranks ran", Whose(spec),
      skipped.size() == 1 ? "rank" : "ranks", fmt::join(skipped, ", "),
      spec.world_size, reasons_text(true));
  if (spec.options.skip_policy == SkipPolicy::kAllowPartial) {
    out->push_back({Finding::Kind::kNote, file, line, which, {}});
  } else {
    out->push_back(
        {Finding::Kind::kFailure,
         file,
         line,
         which + "; a test must skip on every rank or on none (set "
                 "options().skip_policy = disttest::SkipPolicy::kAllowPartial "
                 "to allow it)",
         {}});
  }
}

}  // namespace

bool FollowsFromAnother(std::string_view text) {
  for (std::string_view mark : {kPeerGaveUp, kPeerEnded, kPeerSawMismatch}) {
    if (text.find(mark) != std::string_view::npos) return true;
  }
  // A kill after a peer failed, or because one could not be started; not a
  // rank found stopped (SIGSTOP, a tracer): that one is likely the cause.
  const std::string killed_after =
      fmt::format("was killed by disttest: {} ", kStillRunningAfter);
  if (text.find(kWasStopped) != std::string_view::npos) return false;
  return text.rfind(killed_after, 0) == 0 ||
         (text.find(kCouldNotBeStarted) != std::string_view::npos &&
          (text.starts_with("was killed by disttest: rank ") ||
           text.starts_with("was not started: rank ")));
}

namespace {

// Where `stack` says the rank is in the test's own file: the innermost
// frame there of the first thread that has one ("model_test.cc:88").
std::string NowAt(const std::string& stack, const std::string& test_file) {
  const std::string file = test_file.substr(test_file.rfind('/') + 1);
  if (file.empty()) return "";
  for (const std::vector<std::string>& thread : ParseStacks(stack)) {
    for (const std::string& frame : thread) {
      const std::size_t at = frame.rfind(" at ");
      if (at == std::string::npos) continue;
      std::string where = frame.substr(at + 4);
      where = where.substr(where.rfind('/') + 1);
      if (!where.starts_with(file + ":")) continue;
      // eu-stack gives file:line:column; the line is enough.
      const std::size_t column = where.find(':', file.size() + 1);
      return column == std::string::npos ? where : where.substr(0, column);
    }
  }
  return "";
}

// Whether the harness found `r` still running at the deadline or after a
// peer's failure (and killed it, or would have).
// What a launched job's rank 0 says of a rank whose body outlived the
// timeout (launched/liveness.h, kStuck).
constexpr std::string_view kHungInItsBody =
    "it was still in its body at the test's timeout";

bool FoundStuck(const RankReport& r) {
  return !r.overran.empty() ||
         r.killed_because.find(kStillRunningAfter) != std::string::npos;
}

// What the collective report needs of each rank (collective_report.h).
std::vector<RankState> RankStates(const TestSpec& spec,
                                  const std::vector<RankReport>& ranks) {
  std::vector<RankState> states;
  for (const RankReport& r : ranks) {
    RankState s;
    s.rank = r.rank;
    s.ledger = r.ledger;
    s.ended_as_expected = EndedAsExpected(r);
    // Read before the kill: a rank that disttest killed was running then.
    // A launched rank whose body hung reports so (its watchdog read its
    // ledger then): it was running.
    const bool hung = std::any_of(
        r.results.begin(), r.results.end(), [](const RankMessage& m) {
          return m.message.find(kHungInItsBody) != std::string::npos;
        });
    if (r.killed_because.empty() && r.overran.empty() && !hung && r.outcome) {
      const bool exited = r.outcome->exited();
      const int code = exited ? r.outcome->exit_code() : -1;
      // An exit before its report came is no pass, whatever its status
      // (exit(0) in the body): said as its failure says it.
      s.ended = exited && !r.done      ? EndWithoutReport(*r.outcome)
                : code == kExitPassed  ? "passed"
                : code == kExitFailed  ? "failed"
                : code == kExitSkipped ? "skipped"
                                       : r.outcome->str();
    }
    if (!r.stack.empty()) {
      s.now_at = NowAt(r.stack, spec.file);
      s.stack = true;
    }
    states.push_back(std::move(s));
  }
  return states;
}

// The paragraph from `states`; "" when no rank was stuck and every
// collective completed: nothing to explain.
std::string Paragraph(const std::vector<RankState>& states,
                      const std::vector<RankReport>& ranks) {
  const bool stuck = std::any_of(ranks.begin(), ranks.end(), FoundStuck);
  std::string text = CollectiveReport(states);
  if (!stuck && text.starts_with("no collective is incomplete")) return "";
  return text;
}

}  // namespace

std::string CollectiveParagraph(const TestSpec& spec,
                                const std::vector<RankReport>& ranks) {
  return Paragraph(RankStates(spec, ranks), ranks);
}

std::vector<Finding> Judge(const TestSpec& spec,
                           const std::vector<RankReport>& ranks) {
  // Two or more stacks: one tree, after the failures. Each rank's own stack
  // stays whole in the XML (a property "rank3.disttest_stack"), also when
  // it is the only one (then its failure shows it in place).
  std::vector<std::pair<int, std::string>> stacks;
  std::vector<bool> stuck_at(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    stuck_at[i] = Stuck(ranks[i]);
    if (stuck_at[i]) stacks.emplace_back(ranks[i].rank, ranks[i].stack);
  }
  const bool merging = stacks.size() >= 2;
  std::vector<Item> items;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    AddRankResults(spec, ranks[i], merging && stuck_at[i], &items);
  }
  std::vector<Finding> findings;
  AddFailures(spec, std::move(items), &findings);
  std::vector<int> stuck;
  constexpr std::size_t kMaxStack = 64 * 1024;
  for (const auto& [rank, stack] : stacks) {
    stuck.push_back(rank);
    if (stack.empty()) continue;
    findings.push_back({Finding::Kind::kProperty, spec.file, spec.line,
                        fmt::format("rank{}.disttest_stack", rank),
                        stack.size() <= kMaxStack ? stack
                                                  : stack.substr(0, kMaxStack) +
                                                        "\n... (stack cut)"});
  }
  if (merging) {
    findings.push_back(
        {Finding::Kind::kFailure,
         spec.file,
         spec.line,
         fmt::format("{} where they were when disttest took their stacks "
                     "(every thread's, merged; outermost call first):\n{}",
                     GroupLabel(spec, stuck), MergeStacks(stacks)),
         {}});
  }
  // Calls that differed though every one returned: a broken program that
  // passes otherwise. It goes first: it is the root cause.
  const std::vector<RankState> states = RankStates(spec, ranks);
  std::string calls = MismatchedCalls(states);
  const bool failed =
      !calls.empty() ||
      std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
        return f.kind != Finding::Kind::kProperty;
      });
  if (failed) {
    // The paragraph first: which collective, who is in it, who is not.
    std::string paragraph = Paragraph(states, ranks);
    if (!paragraph.empty()) {
      findings.insert(findings.begin(), {Finding::Kind::kFailure,
                                         spec.file,
                                         spec.line,
                                         std::move(paragraph),
                                         {}});
    }
  }
  const bool calls_first = !calls.empty();
  if (!calls.empty()) {
    findings.insert(findings.begin(), {Finding::Kind::kFatalFailure,
                                       spec.file,
                                       spec.line,
                                       std::move(calls),
                                       {}});
  }
  // Ranks that ended as the test said they would, grouped by that end: as
  // context, not as failures.
  std::vector<std::pair<std::string, std::vector<int>>> expected;
  for (const RankReport& r : ranks) {
    if (!EndedAsExpected(r)) continue;
    const std::string how = r.outcome->str();
    auto same = std::find_if(expected.begin(), expected.end(),
                             [&](const auto& e) { return e.first == how; });
    if (same == expected.end()) {
      expected.push_back({how, {r.rank}});
    } else {
      same->second.push_back(r.rank);
    }
  }
  for (const auto& [how, which] : expected) {
    findings.push_back({Finding::Kind::kNote,
                        spec.file,
                        spec.line,
                        fmt::format("{} {}, as the test expected "
                                    "(ExpectRankToEnd)",
                                    GroupLabel(spec, which), how),
                        {}});
  }
  std::vector<Finding> skips;
  JudgeSkips(spec, ranks, &skips);
  for (Finding& f : skips) {
    // A failure outranks a skip, as in gtest: report the skip as context.
    if (failed && f.kind == Finding::Kind::kSkip) f.kind = Finding::Kind::kNote;
    if (f.kind == Finding::Kind::kFailure ||
        f.kind == Finding::Kind::kFatalFailure) {
      // A partial skip the test does not allow came before what it caused
      // (its peers' collectives that found it gone): it goes first, after
      // calls that differed.
      findings.insert(findings.begin() + (calls_first ? 1 : 0), std::move(f));
    } else {
      findings.push_back(std::move(f));
    }
  }
  return findings;
}

}  // namespace disttest::internal
