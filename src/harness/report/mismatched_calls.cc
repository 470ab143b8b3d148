// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MismatchedCalls (collective_report.h): calls that differed across the
// ranks though every one returned, found by the ledgers' digests; apart from
// the report of the collectives that did not complete.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "harness/report/collective_lines.h"
#include "harness/report/collective_report.h"

namespace disttest::internal {
namespace {

// A rank whose every collective on one communicator returned: its digest
// of the calls and the records its ledger kept.
struct CallMember {
  int rank;
  CommDigest digest;
  std::vector<const LedgerRecord*> records;
};

// The ranks that used communicator `key` in this test and whose every
// collective on it returned (ranks that ended as expected left out).
std::vector<CallMember> ReturnedMembers(const std::vector<RankState>& states,
                                        std::uint64_t key) {
  std::vector<CallMember> members;
  for (const RankState& s : states) {
    if (!s.ledger || s.ended_as_expected) continue;
    const RankLedgerView& v = *s.ledger;
    if (std::find(v.keys.begin(), v.keys.end(), key) == v.keys.end() ||
        v.digests.size() < v.keys.size()) {
      continue;
    }
    CallMember m{s.rank, v.digest_of(key), {}};
    // Not used in this test by this rank: nothing to compare.
    if (m.digest.calls == 0) continue;
    bool returned = true;
    for (const LedgerRecord& r : v.records) {
      if (v.comm_key(r.comm) != key || !r.collective()) continue;
      returned = returned && r.state == LedgerState::kCompleted;
      m.records.push_back(&r);
    }
    if (returned) members.push_back(std::move(m));
  }
  return members;
}

// Where the calls of `members` on `comm` part: the first collective, among
// those the ledgers kept, with each rank's call; or each rank's count and
// digest when the difference is older than that.
void DescribeFirstDifference(const std::vector<CallMember>& members,
                             const std::string& comm,
                             std::vector<std::string>* out) {
  // The first collective, among those the ledgers kept, where the calls
  // part.
  std::set<std::uint64_t> seqs;  // The numbers the ledgers kept.
  for (const CallMember& m : members) {
    for (const LedgerRecord* r : m.records) seqs.insert(r->seq);
  }
  std::vector<int> numbers;
  std::vector<Line> lines;
  std::uint64_t at = UINT64_MAX;
  for (std::uint64_t seq : seqs) {
    const LedgerRecord* one = nullptr;
    bool differ = false;
    for (const CallMember& m : members) {
      for (const LedgerRecord* r : m.records) {
        if (r->seq != seq) continue;
        if (one == nullptr) one = r;
        if (!r->SameCall(*one)) differ = true;
      }
    }
    if (!differ) continue;
    at = seq;
    for (const CallMember& m : members) {
      numbers.push_back(m.rank);
      const LedgerRecord* mine = nullptr;
      for (const LedgerRecord* r : m.records) {
        if (r->seq == seq) mine = r;
      }
      lines.push_back({mine != nullptr ? fmt::format("called {} {}",
                                                     mine->str(), mine->where())
                                       : std::string("made no such collective"),
                       {}});
    }
    break;
  }
  if (at != UINT64_MAX) {
    out->push_back(fmt::format(
        "collective #{} on {} did not match across the ranks, though every "
        "call returned (the data is not what the test meant):",
        at, CommTitle(comm)));
  } else {
    // The first difference is older than what the ledgers kept.
    out->push_back(fmt::format(
        "the collectives on {} did not match across the ranks, though every "
        "call returned (the data is not what the test meant); the first "
        "difference is older than the operations the ledgers keep:",
        CommTitle(comm)));
    for (const CallMember& m : members) {
      numbers.push_back(m.rank);
      lines.push_back({fmt::format("made {} collectives, digest {:016x}",
                                   m.digest.calls, m.digest.digest),
                       {}});
    }
  }
  for (std::string& l : Grouped(numbers, lines)) out->push_back(std::move(l));
}

}  // namespace

std::string MismatchedCalls(const std::vector<RankState>& states) {
  std::vector<std::uint64_t> keys;
  std::map<std::uint64_t, std::string> names;
  for (const RankState& s : states) {
    if (!s.ledger) continue;
    const RankLedgerView& v = *s.ledger;
    for (std::uint32_t id = 0; id < v.keys.size(); ++id) {
      // A communicator past those the ledger keeps has no key to match.
      const std::uint64_t key = v.keys[id];
      if (key != 0 && std::find(keys.begin(), keys.end(), key) == keys.end()) {
        keys.push_back(key);
        names[key] = v.comm_name(id);
      }
    }
  }
  std::vector<std::string> out;
  for (const std::uint64_t key : keys) {
    const std::string& comm = names[key];
    const std::vector<CallMember> members = ReturnedMembers(states, key);
    if (members.size() < 2) continue;
    const bool agree =
        std::all_of(members.begin(), members.end(), [&](const CallMember& m) {
          return m.digest == members.front().digest;
        });
    if (agree) continue;
    DescribeFirstDifference(members, comm, &out);
  }
  std::string text;
  for (const std::string& l : out) {
    if (!text.empty()) text += '\n';
    text += l;
  }
  return text;
}

}  // namespace disttest::internal
