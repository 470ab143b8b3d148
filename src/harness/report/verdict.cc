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

#include "env/text.h"
#include "harness/report/collective_report.h"
#include "harness/report/failure_groups.h"
#include "harness/report/rank_failures.h"
#include "harness/report/stack_tree.h"

namespace disttest::internal {

namespace {

// Names the fixture in findings that concern all of its ranks.
std::string Whose(const TestSpec& spec) {
  return spec.fixture.empty() ? std::string() : spec.fixture + ": ";
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

// As gtest's own result: a rank with a skip and no failure skipped, also
// when the skip came beside its verdict, not through it (where the ranks are
// threads, a thread that no rank runs tells rank 0; a thread the test left
// running may skip after the verdict).
bool Skipped(const RankReport& r) {
  return r.done == RankVerdict::kSkipped ||
         (r.done == RankVerdict::kPassed && FirstSkip(r) != nullptr);
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
  // Ranks that failed and then skipped: a failure, but not ranks that ran on.
  std::vector<int> failed_then_skipped;
  for (const RankReport& r : ranks) {
    if (!Skipped(r)) {
      if (r.done == RankVerdict::kFailed && FirstSkip(r) != nullptr) {
        failed_then_skipped.push_back(r.rank);
      }
      continue;
    }
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
  if (!failed_then_skipped.empty() &&
      static_cast<int>(skipped.size() + failed_then_skipped.size()) ==
          spec.world_size) {
    // Every rank skipped, some after a failure: no partial skip, and that
    // failure is the test's (it is listed with the others).
    out->push_back(
        {Finding::Kind::kNote,
         file,
         line,
         fmt::format("{}every rank skipped ({}), but {} {} failed before {} "
                     "skipped: the test fails for that",
                     Whose(spec), reasons_text(false),
                     failed_then_skipped.size() == 1 ? "rank" : "ranks",
                     fmt::join(failed_then_skipped, ", "),
                     failed_then_skipped.size() == 1 ? "it" : "they"),
         {}});
    return;
  }
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
      "{}{} {} of {} skipped ({}) while {}", Whose(spec),
      skipped.size() == 1 ? "rank" : "ranks", fmt::join(skipped, ", "),
      spec.world_size, reasons_text(true),
      failed_then_skipped.empty()
          ? std::string("the other ranks ran")
          : fmt::format("{} {} failed before {} skipped too",
                        failed_then_skipped.size() == 1 ? "rank" : "ranks",
                        fmt::join(failed_then_skipped, ", "),
                        failed_then_skipped.size() == 1 ? "it" : "they"));
  if (spec.options.skip_policy == SkipPolicy::kAllowPartial) {
    out->push_back({Finding::Kind::kNote, file, line, which, {}});
  } else {
    out->push_back(
        {Finding::Kind::kFailure,
         file,
         line,
         which + "; a test must skip on every rank or on none (set "
                 "options().skip_policy = disttest::SkipPolicy::kAllowPartial "
                 "in the fixture's constructor to allow it)",
         {}});
  }
}

}  // namespace

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
         r.killed_for == RankReport::KilledFor::kPeersFailure;
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
      // Killed after its verdict came (a rank thread whose process ended
      // with its peers', a rank that met the others): it ended as its
      // verdict says.
      const bool by_verdict = r.killed_after_done && r.done;
      const bool exited = by_verdict || r.outcome->exited();
      const int code = by_verdict ? ExitCodeOf(*r.done)
                       : exited   ? r.outcome->exit_code()
                                  : -1;
      // An exit before its report came is no pass, whatever its status
      // (exit(0) in the body): said as its failure says it.
      s.ended = exited && !r.done      ? EndWithoutReport(r)
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

// Each stuck rank's stack whole in the XML (a property
// "rank3.disttest_stack"), and with two or more, one merged tree after the
// failures (a single one shows in its rank's failure).
void AddStacks(const TestSpec& spec,
               const std::vector<std::pair<int, std::string>>& stacks,
               std::vector<Finding>* findings) {
  std::vector<int> stuck;
  constexpr std::size_t kMaxStack = 64 * 1024;
  for (const auto& [rank, stack] : stacks) {
    stuck.push_back(rank);
    if (stack.empty()) continue;
    Finding property{Finding::Kind::kProperty, spec.file, spec.line,
                     fmt::format("rank{}.disttest_stack", rank), stack};
    if (property.value.size() > kMaxStack) {
      property.value.resize(kMaxStack);
      property.value += "\n... (stack cut)";
    }
    findings->push_back(std::move(property));
  }
  if (stacks.size() < 2) return;
  findings->push_back(
      {Finding::Kind::kFailure,
       spec.file,
       spec.line,
       fmt::format("{} where they were when disttest took their stacks "
                   "(every thread's, merged; outermost call first):\n{}",
                   GroupLabel(spec, stuck), MergeStacks(stacks)),
       {}});
}

// Ranks that ended as the test said they would, grouped by that end: as
// context, not as failures.
void AddExpectedEnds(const TestSpec& spec, const std::vector<RankReport>& ranks,
                     std::vector<Finding>* findings) {
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
    findings->push_back({Finding::Kind::kNote,
                         spec.file,
                         spec.line,
                         fmt::format("{} {}, as the test expected "
                                     "(ExpectRankToEnd)",
                                     GroupLabel(spec, which), how),
                         {}});
  }
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
  std::vector<FailureItem> items;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    AddRankResults(spec, ranks[i], merging && stuck_at[i], &items);
  }
  std::vector<Finding> findings;
  AddFailures(spec, std::move(items), &findings);
  AddStacks(spec, stacks, &findings);
  // Calls that differed though every one returned: a broken program that
  // passes otherwise. It goes first: it is the root cause.
  const std::vector<RankState> states = RankStates(spec, ranks);
  std::string calls = MismatchedCalls(states);
  const bool failed_otherwise =
      !calls.empty() ||
      std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
        return f.kind != Finding::Kind::kProperty;
      });
  // Messages not received as they were sent: a broken program that passes
  // otherwise (a transport without tags or types). Judged only then: after
  // another failure (a rank that failed, hung or was killed) a message may
  // be unreceived because of it, and a hang's ledgers were read while the
  // ranks still ran.
  std::string unpaired =
      failed_otherwise ? std::string() : UnpairedMessages(states);
  const bool failed = failed_otherwise || !unpaired.empty();
  if (!unpaired.empty()) {
    findings.insert(findings.begin(), {Finding::Kind::kFatalFailure,
                                       spec.file,
                                       spec.line,
                                       std::move(unpaired),
                                       {}});
  }
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
  AddExpectedEnds(spec, ranks, &findings);
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
