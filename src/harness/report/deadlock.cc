// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/deadlock.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "env/text.h"
#include "harness/report/collective_report.h"

namespace disttest::internal {
namespace {

constexpr std::size_t kStepsShown = 6;

// Which view holds each rank of each communicator (by key), from the
// ranks' own ledgers; a key two views claim one rank of is left out.
class Members {
 public:
  explicit Members(const std::vector<RankLedgerView>& views) {
    for (std::size_t at = 0; at < views.size(); ++at) {
      const RankLedgerView& v = views[at];
      if (v.comm_ranks.size() != v.keys.size()) continue;
      for (std::size_t id = 0; id < v.keys.size(); ++id) {
        const std::uint64_t key = v.keys[id];
        if (key == 0) continue;
        Comm& c = comms_[key];
        const auto [it, made] = c.views.try_emplace(v.comm_ranks[id], at);
        if (!made && it->second != at) c.ambiguous = true;
        if (c.size != 0 && c.size != v.comm_sizes[id]) c.ambiguous = true;
        c.size = v.comm_sizes[id];
      }
    }
  }
  // The view of rank `rank` of communicator `key`.
  std::optional<std::size_t> Of(std::uint64_t key, int rank) const {
    const auto c = comms_.find(key);
    if (c == comms_.end() || c->second.ambiguous) return std::nullopt;
    const auto it = c->second.views.find(rank);
    if (it == c->second.views.end()) return std::nullopt;
    return it->second;
  }
  // Every member's view, when every member is known.
  std::optional<std::vector<std::size_t>> All(std::uint64_t key) const {
    const auto c = comms_.find(key);
    if (c == comms_.end() || c->second.ambiguous ||
        static_cast<int>(c->second.views.size()) != c->second.size) {
      return std::nullopt;
    }
    std::vector<std::size_t> all;
    for (const auto& [rank, at] : c->second.views) all.push_back(at);
    return all;
  }

 private:
  struct Comm {
    std::map<int, std::size_t> views;  // By rank in it.
    int size = 0;
    bool ambiguous = false;
  };
  std::map<std::uint64_t, Comm> comms_;
};

// The blocking call a view's rank is in, when it is whole in the ledger
// and the rank's calls came from one thread.
const LedgerRecord* BlockedIn(const RankLedgerView& v) {
  if (v.blocked == 0 || v.threads) return nullptr;
  for (const LedgerRecord& r : v.records) {
    if (r.index + 1 == v.blocked) {
      return r.state == LedgerState::kEntered ? &r : nullptr;
    }
  }
  return nullptr;
}

// A send and a receive of one kind: they pair, in order.
bool SameKind(const LedgerRecord& a, const LedgerRecord& b) {
  return a.tag == b.tag && a.type == b.type && a.count == b.count;
}

// One rank that waits, and for whom.
struct Waiter {
  const LedgerRecord* call = nullptr;
  // Or the communicator it waits to make (call null).
  const RankLedgerView::Making* making = nullptr;
  std::vector<std::size_t> on;  // The views it waits for.
  std::string why;              // ", which rank 1 has posted no receive for"
};

class Finder {
 public:
  Finder(const std::vector<RankLedgerView>& views,
         const std::vector<bool>& still, const std::vector<bool>& finished)
      : views_(views), still_(still), finished_(finished), members_(views) {}

  std::string Find() {
    std::vector<std::optional<Waiter>> waits(views_.size());
    for (std::size_t at = 0; at < views_.size(); ++at) {
      if (at < still_.size() && still_[at] && !Finished(at)) {
        waits[at] = WaitOf(at);
      }
    }
    // Keep those that wait only for ranks that are kept or have finished,
    // until none goes.
    for (bool changed = true; changed;) {
      changed = false;
      for (std::optional<Waiter>& w : waits) {
        if (!w) continue;
        for (const std::size_t on : w->on) {
          if (!waits[on] && !Finished(on)) {
            w.reset();
            changed = true;
            break;
          }
        }
      }
    }
    std::size_t first = 0;
    while (first < waits.size() && !waits[first]) ++first;
    if (first == waits.size()) return "";
    // Ranks that wait to make a communicator that no rank can come to make
    // are where it began: said first.
    for (std::size_t at = first; at < waits.size(); ++at) {
      if (waits[at] && waits[at]->making != nullptr) {
        return DescribeMaking(at, waits);
      }
    }
    // Walk from the first until a rank comes again (from there, a cycle)
    // or one that has finished (the end of a chain).
    std::vector<std::size_t> path;
    std::size_t at = first;
    while (!Finished(at) &&
           std::find(path.begin(), path.end(), at) == path.end()) {
      path.push_back(at);
      at = waits[at]->on.front();
      for (const std::size_t on : waits[path.back()]->on) {
        if (Finished(on)) at = on;  // The shortest way to the end.
      }
    }
    if (Finished(at)) return Describe(path, at, waits);
    const std::vector<std::size_t> cycle(
        std::find(path.begin(), path.end(), at), path.end());
    return Describe(cycle, std::nullopt, waits);
  }

 private:
  int RankOf(std::size_t at) const { return views_[at].rank; }
  bool Finished(std::size_t at) const {
    return at < finished_.size() && finished_[at];
  }

  std::optional<Waiter> WaitOf(std::size_t at) const {
    const RankLedgerView& v = views_[at];
    const LedgerRecord* call = BlockedIn(v);
    if (call == nullptr) return MakingWait(at);
    const std::uint64_t key = v.comm_key(call->comm);
    if (key == 0 || call->comm >= v.comm_ranks.size()) return std::nullopt;
    const int me = v.comm_ranks[call->comm];
    if (call->collective()) return CollectiveWait(at, *call, key);
    const std::optional<std::size_t> peer = members_.Of(key, call->peer);
    if (!peer || v.dropped > 0 || views_[*peer].dropped > 0) {
      return std::nullopt;  // Its counts would not be whole.
    }
    const bool send = call->op == LedgerOp::kSend;
    // This rank's calls of its kind to (or from) the peer, up to this one,
    // against the peer's of the other side.
    std::size_t mine = 0, theirs = 0;
    for (const LedgerRecord& r : v.records) {
      if (r.index <= call->index && r.op == call->op && r.peer == call->peer &&
          v.comm_key(r.comm) == key && SameKind(r, *call)) {
        ++mine;
      }
    }
    const RankLedgerView& p = views_[*peer];
    const LedgerOp other = send ? LedgerOp::kRecv : LedgerOp::kSend;
    const LedgerRecord* unpaired = nullptr;  // Same tag, another kind.
    for (const LedgerRecord& r : p.records) {
      if (r.op != other || r.peer != me || p.comm_key(r.comm) != key) continue;
      if (SameKind(r, *call)) {
        ++theirs;
      } else if (r.tag == call->tag && r.state == LedgerState::kEntered) {
        unpaired = &r;
      }
    }
    if (theirs >= mine) return std::nullopt;  // Paired: it goes on.
    Waiter w;
    w.call = call;
    w.on.push_back(*peer);
    const std::string who = Peer(*peer, call->peer);
    if (unpaired != nullptr) {
      w.why = fmt::format(
          ", which {}'s {} {} does not pair with (a message pairs only with a "
          "receive of the same tag, element type and count)",
          who, unpaired->str(), unpaired->where());
    } else {
      w.why = send ? fmt::format(", which {} has posted no receive for", who)
                   : fmt::format(", which {} has not sent", who);
    }
    return w;
  }

  // A rank that waits to make a communicator waits for the ranks that have
  // not come to make it with it: any of those that do not make it now.
  std::optional<Waiter> MakingWait(std::size_t at) const {
    const RankLedgerView& v = views_[at];
    if (v.blocked != 0 || v.threads || !v.making) return std::nullopt;
    const RankLedgerView::Making& mine = *v.making;
    Waiter w;
    w.making = &mine;
    int came = 0;
    for (std::size_t m = 0; m < views_.size(); ++m) {
      const RankLedgerView& other = views_[m];
      // Making it, or made it already (Gloo's connect ends on one side
      // before the other).
      if ((other.making && other.making->key == mine.key) ||
          std::find(other.keys.begin(), other.keys.end(), mine.key) !=
              other.keys.end()) {
        ++came;
      } else {
        w.on.push_back(m);
      }
    }
    // All there: it is made, or fails by itself.
    if (came >= mine.size || w.on.empty()) return std::nullopt;
    const int absent = mine.size - came;
    w.why = fmt::format(", which {} of its ranks {} not come to make", absent,
                        absent == 1 ? "has" : "have");
    return w;
  }

  std::optional<Waiter> CollectiveWait(std::size_t at, const LedgerRecord& call,
                                       std::uint64_t key) const {
    const std::optional<std::vector<std::size_t>> all = members_.All(key);
    if (!all) return std::nullopt;
    Waiter w;
    w.call = &call;
    std::vector<int> absent;
    for (const std::size_t m : *all) {
      if (m == at) continue;
      const RankLedgerView& v = views_[m];
      const LedgerRecord* in = BlockedIn(v);
      if (in != nullptr && in->collective() && in->seq == call.seq &&
          v.comm_key(in->comm) == key) {
        continue;  // In it too.
      }
      // Not in it: certainly not past it, when its ledger holds a
      // collective of the communicator before it and none from it on. One
      // past it is waited for no more: a broadcast's, a scatter's or a
      // reduce's member may be done before another has come (trial 12: the
      // root waited for a rank that never came while a third had its data,
      // and the wait was not seen).
      bool before = false, past = false;
      for (const LedgerRecord& r : v.records) {
        if (!r.collective() || v.comm_key(r.comm) != key) continue;
        if (r.seq >= call.seq) {
          past = true;
          break;
        }
        before = true;
      }
      if (past) continue;
      if (!before && v.dropped > 0) return std::nullopt;
      w.on.push_back(m);
      absent.push_back(RankOf(m));
    }
    if (w.on.empty()) return std::nullopt;  // All in it: no wait of these.
    std::sort(absent.begin(), absent.end());
    w.why = fmt::format(", which {} {} not entered", RanksText(absent),
                        absent.size() == 1 ? "has" : "have");
    return w;
  }

  // "rank 3", or "rank 3 (rank 1 there)" where the communicator numbers
  // it otherwise.
  std::string Peer(std::size_t at, int in_comm) const {
    const int rank = RankOf(at);
    return rank == in_comm
               ? fmt::format("rank {}", rank)
               : fmt::format("rank {} (rank {} there)", rank, in_comm);
  }

  // "rank 0 waits in recv(1 x int32 from rank 1, tag 4) at t.cc:9, which
  // rank 1 has not sent".
  std::string StepText(std::size_t at, const Waiter& w) const {
    if (w.call == nullptr) {
      return fmt::format("rank {} waits to make {}{}", RankOf(at),
                         w.making->str(), w.why);
    }
    const std::string title = CommTitle(views_[at].comm_name(w.call->comm));
    return fmt::format("rank {} waits in {}{} {}{}", RankOf(at), w.call->str(),
                       title == "the world communicator" ? "" : " on " + title,
                       w.call->where(), w.why);
  }

  // The ranks that wait to make the communicator that the rank at `first`
  // waits to make, and why none of those that have not come can come: they
  // have finished their tests, or wait themselves.
  std::string DescribeMaking(
      std::size_t first,
      const std::vector<std::optional<Waiter>>& waits) const {
    const RankLedgerView::Making& m = *waits[first]->making;
    std::vector<int> makers;
    for (std::size_t at = 0; at < views_.size(); ++at) {
      if (views_[at].making && views_[at].making->key == m.key) {
        makers.push_back(RankOf(at));
      }
    }
    std::sort(makers.begin(), makers.end());
    std::vector<int> done;
    std::vector<std::size_t> waiting;
    for (const std::size_t on : waits[first]->on) {
      if (Finished(on)) {
        done.push_back(RankOf(on));
      } else {
        waiting.push_back(on);
      }
    }
    std::sort(done.begin(), done.end());
    // As MakingWait counted them: every rank it does not wait for has come
    // (making it, or made it already).
    const int came = static_cast<int>(views_.size() - waits[first]->on.size());
    const int absent = m.size - came;
    std::string text = fmt::format(
        "{} wait{} to make {}, and {} of its ranks {} not come; no other rank "
        "can come (a deadlock): ",
        RanksText(makers), makers.size() == 1 ? "s" : "", m.str(), absent,
        absent == 1 ? "has" : "have");
    if (!done.empty()) {
      const bool one = done.size() == 1;
      text += fmt::format("{} {} finished {} test{}", RanksText(done),
                          one ? "has" : "have", one ? "its" : "their",
                          one ? "" : "s");
    }
    for (std::size_t i = 0; i < waiting.size() && i < kStepsShown; ++i) {
      if (i > 0 || !done.empty()) text += "; ";
      text += StepText(waiting[i], *waits[waiting[i]]);
    }
    if (waiting.size() > kStepsShown) {
      text += fmt::format("; ... ({} ranks wait)", waiting.size());
    }
    return text;
  }

  // `steps`: a cycle, or a chain that ends at rank `end`, which has
  // finished its test.
  std::string Describe(const std::vector<std::size_t>& steps,
                       std::optional<std::size_t> end,
                       const std::vector<std::optional<Waiter>>& waits) const {
    std::vector<int> ranks;
    for (const std::size_t at : steps) ranks.push_back(RankOf(at));
    std::sort(ranks.begin(), ranks.end());
    const bool one = steps.size() == 1;
    std::string text;
    if (end) {
      text = fmt::format(
          "{} wait{} for rank {}, which has finished its test, and cannot go "
          "on (a deadlock): ",
          RanksText(ranks), one ? "s" : "", RankOf(*end));
    } else if (one) {
      text = fmt::format(
          "rank {} waits for itself and cannot go on (a deadlock): ",
          ranks.front());
    } else {
      text = fmt::format(
          "{} wait for each other and none can go on (a deadlock): ",
          RanksText(ranks));
    }
    for (std::size_t i = 0; i < steps.size() && i < kStepsShown; ++i) {
      const std::size_t at = steps[i];
      if (i > 0) text += "; ";
      text += StepText(at, *waits[at]);
    }
    if (steps.size() > kStepsShown) {
      text += fmt::format("; ... ({} ranks in the {})", steps.size(),
                          end ? "chain" : "cycle");
    }
    // The other ranks that never go on: those whose waits lead here, and
    // those in deadlocks of their own.
    std::vector<bool> leads(waits.size(), false);
    for (const std::size_t at : steps) leads[at] = true;
    if (end) leads[*end] = true;
    for (bool more = true; more;) {
      more = false;
      for (std::size_t at = 0; at < waits.size(); ++at) {
        if (!waits[at] || leads[at]) continue;
        for (const std::size_t on : waits[at]->on) {
          if (leads[on]) {
            leads[at] = more = true;
            break;
          }
        }
      }
    }
    std::vector<int> behind, apart;
    for (std::size_t at = 0; at < waits.size(); ++at) {
      if (!waits[at] ||
          std::find(steps.begin(), steps.end(), at) != steps.end()) {
        continue;
      }
      (leads[at] ? behind : apart).push_back(RankOf(at));
    }
    std::sort(behind.begin(), behind.end());
    std::sort(apart.begin(), apart.end());
    if (!behind.empty()) {
      text += fmt::format("; {} wait{} on them", RanksText(behind),
                          behind.size() == 1 ? "s" : "");
    }
    if (!apart.empty()) {
      text += fmt::format("; {} {} in a deadlock of {} own", RanksText(apart),
                          apart.size() == 1 ? "is" : "are",
                          apart.size() == 1 ? "its" : "their");
    }
    return text;
  }

  const std::vector<RankLedgerView>& views_;
  const std::vector<bool>& still_;
  const std::vector<bool>& finished_;
  Members members_;
};

}  // namespace

std::string FindDeadlock(const std::vector<RankLedgerView>& views,
                         const std::vector<bool>& still,
                         const std::vector<bool>& finished) {
  return Finder(views, still, finished).Find();
}

}  // namespace disttest::internal
