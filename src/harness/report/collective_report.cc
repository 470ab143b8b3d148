// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/collective_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>

#include "harness/report/collective_lines.h"

namespace disttest::internal {
namespace {

// Communicator `id` of a rank's ledger: its key, or, for one the ledger
// kept no key of (past LedgerMemory::kComms), one that matches no other
// rank's.
std::uint64_t KeyOf(const RankLedgerView& v, std::uint32_t id) {
  const std::uint64_t key = v.comm_key(id);
  return key != 0
             ? key
             : LedgerKey(fmt::format("rank {} communicator {}", v.rank, id));
}

// One rank's records of one communicator, by key.
struct OnComm {
  std::vector<const LedgerRecord*> records;  // Ascending seq.
};

struct Rank {
  const RankState* state;
  const RankLedgerView* view;
  std::map<std::uint64_t, OnComm> comms;
  // Its latest record, of any communicator.
  const LedgerRecord* latest = nullptr;
};

std::int64_t Ago(const Rank& r, std::int64_t then) {
  return r.view->read_ns - then;
}

std::int64_t PhaseNs(const Rank& r, RankPhase p) {
  return r.view->phase_ns[static_cast<std::size_t>(p)];
}

// Where a rank is now, when it is not where the collective is: "it is in
// send(...) at f.cc:3, for 2.0 s", "its body returned 3.0 s ago", ...
void AppendNow(const Rank& r, const LedgerRecord* skip, Line& line) {
  const LedgerRecord* open = r.latest;
  if (open != nullptr && open != skip && open->state == LedgerState::kEntered) {
    const std::string on =
        open->collective()
            ? fmt::format("#{} {} on {}", open->seq, open->str(),
                          CommTitle(r.view->comm_name(open->comm)))
            : open->str();
    line.pattern += fmt::format("; {{it}} {{is}} in {} {}, for {}", on,
                                open->where(), kTime);
    line.times.push_back(Ago(r, open->entered_ns));
    return;
  }
  const RankState& s = *r.state;
  if (!s.ended.empty()) {
    line.pattern += fmt::format("; {{it}} ended: {}", s.ended);
    return;
  }
  switch (r.view->phase()) {
    case RankPhase::kStarted:
      line.pattern += "; {it} {has} not started to connect";
      return;
    case RankPhase::kConnecting:
      line.pattern += fmt::format(
          "; {{it}} {{is}} still connecting its communicator, for {}", kTime);
      line.times.push_back(Ago(r, PhaseNs(r, RankPhase::kConnecting)));
      return;
    case RankPhase::kFinished:
      line.pattern += fmt::format(
          "; {{its}} test ended {} ago (it waits for the others)", kTime);
      line.times.push_back(Ago(r, PhaseNs(r, RankPhase::kFinished)));
      return;
    case RankPhase::kCheckingLeaks:
      line.pattern += fmt::format(
          "; {{its}} test ended {} ago ({{it}} {{is}} in LeakSanitizer's leak "
          "check)",
          kTime);
      line.times.push_back(Ago(r, PhaseNs(r, RankPhase::kCheckingLeaks)));
      return;
    case RankPhase::kTearDown:
      line.pattern += fmt::format(
          "; {{its}} body returned {} ago (it is in its tear-down)", kTime);
      line.times.push_back(Ago(r, PhaseNs(r, RankPhase::kTearDown)));
      return;
    case RankPhase::kConnected:
    case RankPhase::kSetUp:
    case RankPhase::kBody:
      break;
  }
  if (!s.now_at.empty()) {
    line.pattern += fmt::format("; {{it}} {{is}} now at {}{}", s.now_at,
                                s.stack ? " (stack below)" : "");
  } else if (s.stack) {
    line.pattern += " (stack below)";
  }
}

// What rank `r` did as collective `seq` of communicator `key` (named
// `comm`), and where it is.
Line Describe(const Rank& r, std::uint64_t key, const std::string& comm,
              std::uint64_t seq) {
  Line line;
  auto it = r.comms.find(key);
  const LedgerRecord* at = nullptr;
  const LedgerRecord* before = nullptr;
  if (it != r.comms.end()) {
    for (const LedgerRecord* rec : it->second.records) {
      if (rec->seq == seq) at = rec;
      if (rec->seq < seq) before = rec;
    }
  }
  if (at != nullptr) {
    switch (at->state) {
      case LedgerState::kEntered:
        line.pattern = fmt::format("{{is}} in {} {}, for {}", at->str(),
                                   at->where(), kTime);
        line.times.push_back(Ago(r, at->entered_ns));
        return line;
      case LedgerState::kFailed:
        line.pattern = fmt::format("failed in {} {} after {}", at->str(),
                                   at->where(), kTime);
        line.times.push_back(at->ended_ns - at->entered_ns);
        break;
      case LedgerState::kCompleted:
        line.pattern = fmt::format("completed {} {}, {} ago", at->str(),
                                   at->where(), kTime);
        line.times.push_back(Ago(r, at->ended_ns));
        break;
    }
    AppendNow(r, at, line);
    return line;
  }
  line.pattern = "{is} not in it: ";
  if (before != nullptr) {
    line.pattern += fmt::format("{{its}} last collective, #{} {} {}, ",
                                before->seq, before->str(), before->where());
    if (before->state == LedgerState::kCompleted) {
      line.pattern += fmt::format("completed {} ago", kTime);
      line.times.push_back(Ago(r, before->ended_ns));
    } else {
      line.pattern += fmt::format("failed {} ago", kTime);
      line.times.push_back(Ago(r, before->ended_ns));
    }
  } else {
    // In this test: a pooled rank's earlier tests entered some (trial 10:
    // "rank 1's last collective was #1" beside "entered no collective").
    line.pattern +=
        fmt::format("{{it}} {{has}} entered no collective on {} in this test",
                    CommTitle(comm));
  }
  AppendNow(r, nullptr, line);
  return line;
}

// The collective of `key` (`comm`, the world's when `world`) that not every
// member completed, if any: who entered it with which call, and who did not.
void ReportCommunicator(const std::vector<RankState>& states,
                        const std::vector<Rank>& ranks, std::uint64_t key,
                        const std::string& comm, bool world,
                        std::vector<std::string>* out) {
  // Members: every rank for the world; for another, those that used it or
  // made it (trial 12: the rank that never entered a split's broadcast,
  // the cause, was left out of its paragraph).
  std::vector<const Rank*> members;
  for (const Rank& r : ranks) {
    const std::vector<std::uint64_t>& made = r.view->keys;
    // (One whose older records are gone is left out: its count of them
    // would not be whole.)
    if (world || r.comms.count(key) != 0 ||
        (r.view->dropped == 0 &&
         std::find(made.begin(), made.end(), key) != made.end())) {
      members.push_back(&r);
    }
  }
  // The numbers may go on from earlier tests (a pooled rank, a launched
  // one): a rank without this test's records of it is where the test
  // started, one before the least first number.
  std::int64_t base = INT64_MAX;
  std::int64_t highest = -1;
  for (const Rank* r : members) {
    auto it = r->comms.find(key);
    if (it == r->comms.end() || it->second.records.empty()) continue;
    base = std::min(
        base, static_cast<std::int64_t>(it->second.records.front()->seq) - 1);
    highest = std::max(
        highest, static_cast<std::int64_t>(it->second.records.back()->seq));
  }
  if (highest < 0) return;  // No rank entered any.
  // The last collective every member completed.
  std::int64_t done = INT64_MAX;
  for (const Rank* r : members) {
    auto it = r->comms.find(key);
    std::int64_t d = base;
    if (it != r->comms.end() && !it->second.records.empty()) {
      const LedgerRecord* last = it->second.records.back();
      const auto seq = static_cast<std::int64_t>(last->seq);
      d = last->state == LedgerState::kCompleted ? seq : seq - 1;
    }
    done = std::min(done, d);
  }
  if (done + 1 > highest) return;  // Each completed all it entered.
  const auto seq = static_cast<std::uint64_t>(done + 1);
  // Ranks that entered it with different calls: a broken program.
  const LedgerRecord* first_call = nullptr;
  bool mismatch = false;
  std::vector<int> numbers;
  std::vector<Line> lines;
  for (const Rank* r : members) {
    auto it = r->comms.find(key);
    if (it != r->comms.end()) {
      for (const LedgerRecord* rec : it->second.records) {
        if (rec->seq != seq) continue;
        if (first_call == nullptr) first_call = rec;
        if (!rec->SameCall(*first_call)) mismatch = true;
      }
    }
    numbers.push_back(r->state->rank);
    lines.push_back(Describe(*r, key, comm, seq));
  }
  // The ranks whose ledger did not come (a launched rank that died)
  // are members of the world that the report cannot place.
  if (world) {
    for (const RankState& st : states) {
      if (st.ledger) continue;
      numbers.push_back(st.rank);
      Line line{"{is} not known here: {its} ledger did not come", {}};
      if (!st.ended.empty()) line.pattern += "; {it} ended: " + st.ended;
      lines.push_back(std::move(line));
    }
  }
  out->push_back(fmt::format(
      "collective #{} on {} {}:", seq, CommTitle(comm),
      mismatch ? "does not match across the ranks" : "never completed"));
  for (std::string& l : Grouped(numbers, lines)) out->push_back(std::move(l));
}

// Every collective completed: where each rank is past its last one (a send
// that waits for a receive, a body that does not return).
void ReportWhereRanksAre(const std::vector<Rank>& ranks,
                         const std::function<bool(std::uint64_t)>& is_world,
                         std::vector<std::string>* out) {
  std::vector<int> numbers;
  std::vector<Line> lines;
  for (const Rank& r : ranks) {
    Line line;
    const LedgerRecord* last = nullptr;  // Its last on a world.
    for (const auto& [key, on] : r.comms) {
      if (!is_world(key) || on.records.empty()) continue;
      if (last == nullptr || on.records.back()->index > last->index) {
        last = on.records.back();
      }
    }
    if (last != nullptr) {
      line.pattern = fmt::format("{{is}} past collective #{} {} {}", last->seq,
                                 last->str(), last->where());
    } else {
      line.pattern = "{has} entered no collective";
    }
    AppendNow(r, nullptr, line);
    numbers.push_back(r.state->rank);
    lines.push_back(std::move(line));
  }
  out->push_back(
      "no collective is incomplete on any communicator; where the ranks "
      "are:");
  for (std::string& l : Grouped(numbers, lines)) out->push_back(std::move(l));
}

// The lines, at most `max_lines` (the last one saying how many more).
std::string JoinLines(std::vector<std::string> out, std::size_t max_lines) {
  if (out.size() > max_lines) {
    const std::size_t more = out.size() - (max_lines - 1);
    out.resize(max_lines - 1);
    out.push_back(
        fmt::format("  ... and {} more lines (every rank's detail "
                    "is in the XML)",
                    more));
  }
  std::string text;
  for (const std::string& l : out) {
    if (!text.empty()) text += '\n';
    text += l;
  }
  return text;
}

}  // namespace

std::string CommTitle(const std::string& name) {
  if (name == "world") return "the world communicator";
  if (name.rfind("unnamed ", 0) == 0) return "the " + name;
  return name;
}

std::string CollectiveReport(const std::vector<RankState>& states,
                             std::size_t max_lines) {
  std::vector<Rank> ranks;
  std::vector<std::uint64_t> keys;  // The world first, then as they come.
  std::map<std::uint64_t, std::string> names;
  for (const RankState& s : states) {
    if (!s.ledger) continue;
    Rank r{&s, &*s.ledger, {}, nullptr};
    for (const LedgerRecord& rec : s.ledger->records) {
      if (r.latest == nullptr || rec.index > r.latest->index) r.latest = &rec;
      if (!rec.collective()) continue;
      const std::uint64_t key = KeyOf(*s.ledger, rec.comm);
      r.comms[key].records.push_back(&rec);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        keys.push_back(key);
        names[key] = s.ledger->comm_name(rec.comm);
      }
    }
    ranks.push_back(std::move(r));
  }
  // No rank used a communicator (none was made, or no ledger was read):
  // nothing to say about collectives.
  if (std::none_of(ranks.begin(), ranks.end(),
                   [](const Rank& r) { return r.latest != nullptr; })) {
    return "";
  }
  auto is_world = [&names](std::uint64_t key) { return names[key] == "world"; };
  std::stable_partition(keys.begin(), keys.end(), is_world);

  std::vector<std::string> out;
  for (const std::uint64_t key : keys) {
    ReportCommunicator(states, ranks, key, names[key], is_world(key), &out);
  }
  if (out.empty()) ReportWhereRanksAre(ranks, is_world, &out);
  return JoinLines(std::move(out), max_lines);
}

std::string OpenMismatch(const std::vector<RankLedgerView>& views) {
  struct Seen {
    const LedgerRecord* first = nullptr;
    std::string name;
    bool open = false;
    bool differ = false;
  };
  std::map<std::pair<std::uint64_t, std::uint64_t>, Seen> seen;
  for (const RankLedgerView& v : views) {
    for (const LedgerRecord& rec : v.records) {
      if (!rec.collective()) continue;
      Seen& s = seen[{KeyOf(v, rec.comm), rec.seq}];
      if (s.first == nullptr) {
        s.first = &rec;
        s.name = v.comm_name(rec.comm);
      } else if (!rec.SameCall(*s.first)) {
        s.differ = true;
      }
      s.open = s.open || rec.state == LedgerState::kEntered;
    }
  }
  const Seen* found = nullptr;
  for (const auto& entry : seen) {
    const Seen& s = entry.second;
    if (!s.differ || !s.open) continue;
    if (found == nullptr || s.first->seq < found->first->seq) found = &s;
  }
  if (found == nullptr) return "";
  return fmt::format("collective #{} on {} does not match across the ranks",
                     found->first->seq, CommTitle(found->name));
}

}  // namespace disttest::internal
