// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the ranks' ledgers say of an operation that timed out (comm/ledger.h):
// which ranks a collective waits for, and where a send's or receive's peer
// is. Readers only: they read every rank's view and write nothing.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "comm/ledger.h"
#include "env/text.h"

namespace disttest::internal {

std::string MissingFromCollective(const LedgerMemory& memory, int self,
                                  std::uint64_t key, std::uint64_t seq,
                                  bool every_rank) {
  if (key == 0) return "";
  std::vector<int> missing;
  // What each missing rank did last on the communicator, with its ranks.
  std::map<std::string, std::vector<int>> last;
  std::vector<std::string> order;
  // Where those not in it are now, when in a call of another communicator
  // (trial 12: "rank 2 has entered no collective" of a rank that waited in
  // the world's barrier all along).
  std::map<std::string, std::vector<int>> elsewhere;  // Where: its ranks.
  std::vector<std::string> elsewhere_order;
  for (int q = 0; q < memory.ranks(); ++q) {
    if (q == self) continue;
    const RankLedgerView v = memory.Read(q);
    // A rank that never made the communicator is one of its members only
    // when every rank is.
    if (!every_rank &&
        std::find(v.keys.begin(), v.keys.end(), key) == v.keys.end()) {
      continue;
    }
    const LedgerRecord* newest = nullptr;
    for (const LedgerRecord& r : v.records) {
      if (!r.collective() || v.comm_key(r.comm) != key) continue;
      if (newest == nullptr || r.seq > newest->seq) newest = &r;
    }
    if (newest != nullptr && newest->seq >= seq) continue;  // It is in it.
    for (const LedgerRecord& r : v.records) {
      if (r.index + 1 != v.blocked || v.comm_key(r.comm) == key) continue;
      const std::string where =
          fmt::format("{} on {} {}", r.str(), v.comm_name(r.comm), r.where());
      if (elsewhere.find(where) == elsewhere.end()) {
        elsewhere_order.push_back(where);
      }
      elsewhere[where].push_back(q);
    }
    const std::string what =
        newest == nullptr ? std::string()
                          : fmt::format("#{} {}", newest->seq, newest->str());
    if (last.find(what) == last.end()) order.push_back(what);
    last[what].push_back(q);
    missing.push_back(q);
  }
  if (missing.empty()) return "";
  std::string text = fmt::format("waiting for {}: ", RanksText(missing));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string& what = order[i];
    const std::vector<int>& ranks = last[what];
    if (i > 0) text += "; ";
    const std::string who = RanksText(ranks);
    text += what.empty()
                ? fmt::format(
                      "{} {} entered no collective of this "
                      "communicator",
                      who, ranks.size() == 1 ? "has" : "have")
                : fmt::format("{}'s last collective was {}", who, what);
  }
  for (const std::string& where : elsewhere_order) {
    const std::vector<int>& ranks = elsewhere[where];
    text += fmt::format("; {} {} in {}", RanksText(ranks),
                        ranks.size() == 1 ? "is" : "are", where);
  }
  return text;
}

std::string WhereIsPeer(const LedgerMemory& memory, int self, std::uint64_t key,
                        int peer) {
  if (key == 0) return "";
  for (int q = 0; q < memory.ranks(); ++q) {
    if (q == self) continue;
    const RankLedgerView v = memory.Read(q);
    bool member = false;
    for (std::size_t id = 0; id < v.keys.size() && id < v.comm_ranks.size();
         ++id) {
      member = member || (v.keys[id] == key && v.comm_ranks[id] == peer);
    }
    if (!member) continue;
    const std::string who =
        q == peer ? fmt::format("rank {}", q)
                  : fmt::format("rank {} (rank {} there)", q, peer);
    const LedgerRecord* newest =
        v.records.empty() ? nullptr : &v.records.back();
    for (const LedgerRecord& r : v.records) {
      if (r.index + 1 != v.blocked) continue;
      return fmt::format("{} is in {} {}, for {} ms", who, r.str(), r.where(),
                         (v.read_ns - r.entered_ns) / 1000000);
    }
    if (v.phase() == RankPhase::kFinished) {
      return fmt::format("{} has finished its test", who);
    }
    if (newest == nullptr) {
      return fmt::format("{} has made no call of a communicator in this test",
                         who);
    }
    return fmt::format("{} is in no call of a communicator; its last was {} {}",
                       who, newest->str(), newest->where());
  }
  return "";
}

}  // namespace disttest::internal
