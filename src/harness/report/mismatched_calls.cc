// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MismatchedCalls and UnpairedMessages (collective_report.h): calls that
// differed across the ranks though every one returned, found by the
// ledgers' digests, and messages not received as they were sent, found by
// their balances; apart from the report of the collectives that did not
// complete.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/report/collective_lines.h"
#include "harness/report/collective_report.h"

namespace disttest::internal {
namespace {

// The communicators the ranks' ledgers name, in order of first sight, each
// key (a communicator past those a ledger keeps has none: left out) with
// its name.
std::vector<std::pair<std::uint64_t, std::string>> Communicators(
    const std::vector<RankState>& states) {
  std::vector<std::pair<std::uint64_t, std::string>> comms;
  for (const RankState& s : states) {
    if (!s.ledger) continue;
    const RankLedgerView& v = *s.ledger;
    for (std::uint32_t id = 0; id < v.keys.size(); ++id) {
      const std::uint64_t key = v.keys[id];
      if (key != 0 &&
          std::none_of(comms.begin(), comms.end(),
                       [&](const auto& c) { return c.first == key; })) {
        comms.emplace_back(key, v.comm_name(id));
      }
    }
  }
  return comms;
}

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

// The ranks that ended as the test expected and made collectives on
// communicator `key` that returned: those calls, which their survivors'
// must match (trial 12: a dead rank's call that differed passed, as its
// digest of fewer calls is no one's to compare).
std::vector<CallMember> EndedMembers(const std::vector<RankState>& states,
                                     std::uint64_t key) {
  std::vector<CallMember> members;
  for (const RankState& s : states) {
    if (!s.ledger || !s.ended_as_expected) continue;
    const RankLedgerView& v = *s.ledger;
    CallMember m{s.rank, {}, {}};
    for (const LedgerRecord& r : v.records) {
      if (v.comm_key(r.comm) != key || !r.collective() ||
          r.state != LedgerState::kCompleted) {
        continue;
      }
      m.records.push_back(&r);
    }
    if (!m.records.empty()) members.push_back(std::move(m));
  }
  return members;
}

// Whether two of `members` made different calls as one collective of
// those their ledgers kept.
bool RecordsDiffer(const std::vector<CallMember>& members) {
  std::map<std::uint64_t, const LedgerRecord*> first;
  for (const CallMember& m : members) {
    for (const LedgerRecord* r : m.records) {
      const auto [it, made] = first.try_emplace(r->seq, r);
      if (!made && !r->SameCall(*it->second)) return true;
    }
  }
  return false;
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

// Two communicators that the ledgers cannot tell apart (made alike, on two
// stores of one scope, with one prefix and size, by different ranks): two
// ranks that used communicator `key` in this test as one rank of it, or more
// ranks than its size. Their calls would be compared with the wrong
// communicator's; "" when the key is one communicator's.
std::string Ambiguous(const std::vector<RankState>& states, std::uint64_t key,
                      const std::string& comm) {
  std::map<int, std::vector<int>> by_rank_there;  // Its rank: world ranks.
  int size = 0;
  int members = 0;
  for (const RankState& s : states) {
    if (!s.ledger) continue;
    const RankLedgerView& v = *s.ledger;
    std::set<int> mine;
    for (std::size_t id = 0; id < v.keys.size(); ++id) {
      if (v.keys[id] != key || id >= v.comm_ranks.size()) continue;
      const bool used = (id < v.digests.size() && v.digests[id].calls > 0) ||
                        (id < v.transfers.size() && v.transfers[id].count > 0);
      if (!used) continue;
      mine.insert(v.comm_ranks[id]);
      if (id < v.comm_sizes.size()) size = v.comm_sizes[id];
    }
    if (!mine.empty()) ++members;
    for (int there : mine) by_rank_there[there].push_back(s.rank);
  }
  for (const auto& [there, worlds] : by_rank_there) {
    if (worlds.size() < 2) continue;
    return fmt::format(
        "{} is rank {} of ranks {} at once: two communicators made alike (the "
        "same Store::scope(), prefix and size, on different stores) cannot "
        "be told apart, so their calls cannot be compared; give each store a "
        "scope of its own",
        CommTitle(comm), there, fmt::join(worlds, " and "));
  }
  // Comm ranks lie in [0, size) for a communicator that numbers its ranks
  // right, so this is reached only where one (a user's own) does not.
  if (size > 0 && members > size) {
    return fmt::format(
        "{} of size {} was used by {} ranks: two communicators made alike (the "
        "same Store::scope(), prefix and size, on different stores) cannot be "
        "told apart, so their calls cannot be compared; give each store a "
        "scope of its own",
        CommTitle(comm), size, members);
  }
  return "";
}

}  // namespace

std::string MismatchedCalls(const std::vector<RankState>& states) {
  std::vector<std::string> out;
  for (const auto& [key, comm] : Communicators(states)) {
    if (std::string twins = Ambiguous(states, key, comm); !twins.empty()) {
      out.push_back(std::move(twins));
      continue;
    }
    std::vector<CallMember> members = ReturnedMembers(states, key);
    const bool agree =
        std::all_of(members.begin(), members.end(), [&](const CallMember& m) {
          return m.digest == members.front().digest;
        });
    if (members.size() >= 2 && !agree) {
      DescribeFirstDifference(members, comm, &out);
      continue;
    }
    // Ranks that ended as expected: their calls before the end, one by
    // one, against the others'.
    std::vector<CallMember> ended = EndedMembers(states, key);
    if (ended.empty() || members.empty()) continue;
    for (CallMember& m : ended) members.push_back(std::move(m));
    std::sort(members.begin(), members.end(),
              [](const CallMember& a, const CallMember& b) {
                return a.rank < b.rank;
              });
    if (RecordsDiffer(members)) DescribeFirstDifference(members, comm, &out);
  }
  return fmt::format("{}", fmt::join(out, "\n"));
}

std::string RankThere(int world, int there) {
  return world == there ? fmt::format("rank {}", world)
                        : fmt::format("rank {} (rank {} there)", world, there);
}

std::string MessageHead(std::uint64_t seq, const std::string& from,
                        const std::string& to, std::uint32_t tag) {
  // "1st", "2nd", "3rd", "4th", ... "11th", "12th", "13th", "21st".
  const std::uint64_t n = seq + 1;
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return fmt::format("the {}{} message from {} to {} with tag {}", n, suffix,
                     from, to, tag);
}

namespace {

// One message of a pair's, as the ledgers kept its send and its receive.
struct Message {
  const LedgerRecord* send = nullptr;
  const LedgerRecord* recv = nullptr;
};

// A member of a communicator: its rank there, and its view.
struct PairMember {
  int world = 0;
  const RankLedgerView* view = nullptr;
};

// The first message of the members' on communicator `key` that was not
// received as sent, as a line; "" when the ledgers no longer show it.
std::string FirstUnpaired(const std::map<int, PairMember>& members,
                          std::uint64_t key) {
  // By sender, receiver, tag and number in their pair.
  std::map<std::tuple<int, int, std::uint32_t, std::uint64_t>, Message> all;
  for (const auto& [there, m] : members) {
    for (const LedgerRecord& r : m.view->records) {
      if (r.collective() || m.view->comm_key(r.comm) != key) continue;
      const bool send = r.op == LedgerOp::kSend;
      Message& msg =
          all[{send ? there : r.peer, send ? r.peer : there, r.tag, r.seq}];
      (send ? msg.send : msg.recv) = &r;
    }
  }
  auto who = [&](int there) {
    const auto it = members.find(there);
    return RankThere(it == members.end() ? there : it->second.world, there);
  };
  // Whether `there`'s ledger kept every operation of its test.
  auto whole = [&](int there) {
    const auto it = members.find(there);
    return it != members.end() && it->second.view->dropped == 0;
  };
  std::string first;
  std::int64_t first_ns = INT64_MAX;
  for (const auto& [id, msg] : all) {
    const auto& [from, to, tag, seq] = id;
    const bool sent = msg.send && msg.send->state == LedgerState::kCompleted;
    const bool received =
        msg.recv && msg.recv->state == LedgerState::kCompleted;
    const std::string head = MessageHead(seq, who(from), who(to), tag);
    std::string line;
    std::int64_t at = 0;
    if (sent && received &&
        !(msg.send->type == msg.recv->type &&
          msg.send->count == msg.recv->count)) {
      line = fmt::format(
          "{} was sent as {} {} and received as {} {}: the data is not what "
          "the test meant",
          head, msg.send->str(), msg.send->where(), msg.recv->str(),
          msg.recv->where());
      at = msg.send->entered_ns;
    } else if (sent && !received && whole(to)) {
      line = fmt::format(
          "{}, sent as {} {}, was never received: {} made no "
          "receive for it",
          head, msg.send->str(), msg.send->where(), who(to));
      at = msg.send->entered_ns;
    } else if (received && !sent && whole(from)) {
      line = fmt::format("{} was received as {} {}, but {} never sent it", head,
                         msg.recv->str(), msg.recv->where(), who(from));
      at = msg.recv->entered_ns;
    }
    if (!line.empty() && at < first_ns) {
      first = std::move(line);
      first_ns = at;
    }
  }
  return first;
}

}  // namespace

std::string UnpairedMessages(const std::vector<RankState>& states) {
  std::vector<std::string> out;
  for (const auto& [key, name] : Communicators(states)) {
    // Every member's ledger, by its rank there: a message's balance is
    // only whole with both its ends. A member that ended as the test
    // expected may have been killed between a send's return and its
    // peer's receive.
    std::map<int, PairMember> members;
    int size = 0;
    bool whole = true;
    CommTransfers sum;
    for (const RankState& s : states) {
      if (!s.ledger) continue;
      const RankLedgerView& v = *s.ledger;
      for (std::size_t id = 0; id < v.keys.size(); ++id) {
        if (v.keys[id] != key) continue;
        if (id >= v.comm_ranks.size() || id >= v.comm_sizes.size() ||
            id >= v.transfers.size() || s.ended_as_expected) {
          whole = false;
          break;
        }
        members[v.comm_ranks[id]] = {s.rank, &v};
        size = v.comm_sizes[id];
        const CommTransfers t = v.transfers_of(key);
        sum.count += t.count;
        sum.balance += t.balance;
        sum.failed += t.failed;
        break;
      }
    }
    // A send or receive that failed (a timeout the test expected) took its
    // number in its pair: the balance says nothing then.
    if (!whole || sum.failed > 0 || sum.count == 0 || sum.balance == 0 ||
        members.size() != static_cast<std::size_t>(size)) {
      continue;
    }
    const std::string title = fmt::format(
        "the sends and receives on {} did not pair, though every one returned",
        CommTitle(name));
    std::string first = FirstUnpaired(members, key);
    if (!first.empty()) {
      out.push_back(title + ":");
      out.push_back("  " + first);
      continue;
    }
    // Older than what the ledgers kept: what each rank did.
    out.push_back(title +
                  "; the first message that did not pair is older than "
                  "the operations the ledgers keep:");
    std::vector<int> numbers;
    std::vector<Line> lines;
    for (const auto& [there, m] : members) {
      numbers.push_back(m.world);
      const std::uint64_t n = m.view->transfers_of(key).count;
      lines.push_back(
          {fmt::format("made {} {}", n,
                       n == 1 ? "send or receive" : "sends and receives"),
           {}});
    }
    for (std::string& l : Grouped(numbers, lines)) out.push_back(std::move(l));
  }
  return fmt::format("{}", fmt::join(out, "\n"));
}

}  // namespace disttest::internal
