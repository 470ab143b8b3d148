// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A rank's own failures (rank_failures.h): what it reported, its channel's
// errors, its sanitizer's report and how it ended when that is itself a
// failure; apart from the verdict's rules for the test as a whole.
#include "harness/report/rank_failures.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

namespace disttest::internal {

bool EndedWithDisttestsStatus(const RankOutcome& o, int status,
                              std::optional<RankPhase> phase) {
  return o.exited() && o.exit_code() == status &&
         !(phase && InTheTestsCode(*phase));
}

std::string EndWithoutReport(const RankReport& r) {
  const RankOutcome& o = *r.outcome;
  const RankPhase phase = r.ledger ? r.ledger->phase() : RankPhase::kBody;
  const int status =
      EndedWithDisttestsStatus(
          o, o.exit_code(),
          r.ledger ? std::optional<RankPhase>(phase) : std::nullopt)
          ? o.exit_code()
          : 0;
  switch (status) {
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
      break;
  }
  if (phase == RankPhase::kTearDown) {
    return fmt::format(
        "{} after its body returned, in TearDownRank(), TearDown() or the "
        "fixture's destructor",
        o.str());
  }
  if (phase == RankPhase::kFinished) {
    return fmt::format("{} after its test, before it reported its verdict",
                       o.str());
  }
  return fmt::format("{} before the test body finished", o.str());
}

namespace {

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

// Whether disttest ended `r` (or did not start it) for another rank's
// failure, and did not find it stopped (then it is likely the cause).
bool FollowsFromAPeer(const RankReport& r) {
  return r.killed_for != RankReport::KilledFor::kItself && !r.was_stopped;
}

// A rank's end as a failure, and whether that follows from another rank's.
struct End {
  End(std::string text, bool follows = false)  // NOLINT: from a text.
      : text(std::move(text)), follows(follows) {}
  std::string text;
  bool follows;
};

// How a rank ended when that is itself a failure; nullopt when it ended the
// way the harness ends a rank that ran its body to the end.
std::optional<End> AbnormalEnd(const RankReport& r, bool in_tree) {
  if (!r.not_started.empty()) {
    return End(fmt::format("was not started: {}", r.not_started),
               FollowsFromAPeer(r));
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
    return End(
        WithStack(r,
                  fmt::format("was killed by disttest: {}", r.killed_because),
                  in_tree),
        FollowsFromAPeer(r));
  }
  if (!r.outcome) return std::string("ended, but how is unknown");
  const RankOutcome& o = *r.outcome;
  if (o.signaled()) return o.str();
  if (!r.done && !r.ended_the_process.empty()) return r.ended_the_process;
  if (!r.done) {
    std::string end = EndWithoutReport(r);
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

}  // namespace

void AddRankResults(const TestSpec& spec, const RankReport& r, bool in_tree,
                    std::vector<FailureItem>* out) {
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const RankMessage& m = r.results[i];
    FailureItem item;
    item.rank = r.rank;
    item.file = m.file.empty() ? spec.file : m.file;
    item.line = m.file.empty() || m.line < 0 ? spec.line : m.line;
    item.text = m.message;
    item.follows = m.follows;
    if (i < r.received.size()) item.at = r.received[i];
    if (m.kind == RankMessage::Kind::kFatalFailure) {
      item.kind = Finding::Kind::kFatalFailure;
    } else if (m.kind == RankMessage::Kind::kNonFatalFailure) {
      item.kind = Finding::Kind::kFailure;
    } else if (m.kind == RankMessage::Kind::kProperty) {
      // Per rank in the XML: "rank1.key".
      const std::size_t nul = m.message.find('\0');
      item.kind = Finding::Kind::kProperty;
      item.text =
          !m.message.empty() && m.message[0] == kPropertyOfTheRanks
              ? fmt::format("ranks.{}", m.message.substr(1, nul - 1))
              : fmt::format("rank{}.{}", r.rank, m.message.substr(0, nul));
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
  std::optional<End> end = AbnormalEnd(r, in_tree);
  if (r.sanitizer && !Mentions(r, r.sanitizer->headline)) {
    std::string text = r.sanitizer->str();
    // An exit that follows the report (ASan's, UBSan's halt) is its
    // consequence: one failure, not two.
    if (end && r.outcome && !r.outcome->signaled() &&
        r.killed_because.empty() && r.overran.empty()) {
      text += fmt::format("\n  then the rank {}", end->text);
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
                    std::move(end->text),
                    {},
                    r.ended_at,
                    end->follows});
  }
}

}  // namespace disttest::internal
