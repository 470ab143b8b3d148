// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the ledger's records and views say (comm/ledger.h): an operation's
// text and where it was called, what ranks' calls must agree on (SameCall,
// CallHash), a view's phase and communicators, and short names and counts.
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "comm/ledger.h"
#include "comm/ledger_area.h"

namespace disttest::internal {
namespace {

bool HasReduceOp(LedgerOp op) {
  return op == LedgerOp::kAllReduce || op == LedgerOp::kReduce ||
         op == LedgerOp::kReduceScatter;
}
bool HasRoot(LedgerOp op) {
  return op == LedgerOp::kBroadcast || op == LedgerOp::kReduce ||
         op == LedgerOp::kGather || op == LedgerOp::kScatter;
}

}  // namespace

std::uint64_t CallHash(const Ledger::Call& c) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<std::uint64_t>(c.op));
  if (c.op == LedgerOp::kAllToAllV) {
    mix(static_cast<std::uint64_t>(c.type));
  } else if (c.op != LedgerOp::kBarrier && c.op != LedgerOp::kSplit) {
    mix(static_cast<std::uint64_t>(c.type));
    mix(c.count);
  }
  if (HasReduceOp(c.op)) mix(static_cast<std::uint64_t>(c.reduce));
  if (HasRoot(c.op)) {
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.peer)));
  }
  if (c.op == LedgerOp::kAllGatherV) mix(c.tag);
  return h;
}

const char* Name(RankPhase phase) {
  switch (phase) {
    case RankPhase::kStarted:
      return "started";
    case RankPhase::kConnecting:
      return "connecting";
    case RankPhase::kConnected:
      return "connected";
    case RankPhase::kSetUp:
      return "set-up";
    case RankPhase::kBody:
      return "body";
    case RankPhase::kTearDown:
      return "tear-down";
    case RankPhase::kCheckingLeaks:
      return "leak-check";
    case RankPhase::kFinished:
      return "finished";
  }
  return "unknown";
}

std::string LedgerRecord::str() const {
  switch (op) {
    case LedgerOp::kBarrier:
      return "barrier()";
    case LedgerOp::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case LedgerOp::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         peer);
    case LedgerOp::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case LedgerOp::kSend:
      return fmt::format("{}send({} x {} to rank {}, tag {})",
                         nonblocking ? "i" : "", count, Name(type), peer, tag);
    case LedgerOp::kRecv:
      return fmt::format("{}recv({} x {} from rank {}, tag {})",
                         nonblocking ? "i" : "", count, Name(type), peer, tag);
    case LedgerOp::kReduce:
      return fmt::format("reduce({} x {}, {}, root {})", count, Name(type),
                         Name(reduce), peer);
    case LedgerOp::kReduceScatter:
      return fmt::format("reduce_scatter({} x {}, {})", count, Name(type),
                         Name(reduce));
    case LedgerOp::kGather:
      return fmt::format("gather({} x {}, root {})", count, Name(type), peer);
    case LedgerOp::kScatter:
      return fmt::format("scatter({} x {}, root {})", count, Name(type), peer);
    case LedgerOp::kAllToAll:
      return fmt::format("alltoall({} x {})", count, Name(type));
    case LedgerOp::kAllGatherV:
      return fmt::format(
          "allgatherv({} x {}, counts {})", count, Name(type),
          CountsText(counts.data(), counts.empty() ? 0 : ranks, tag));
    case LedgerOp::kAllToAllV:
      return fmt::format("alltoallv({} x {} sent)", count, Name(type));
    case LedgerOp::kSplit:
      return peer == Communicator::kNoColor
                 ? fmt::format("split(no color, key {})",
                               static_cast<std::int32_t>(tag))
                 : fmt::format("split(color {}, key {})", peer,
                               static_cast<std::int32_t>(tag));
  }
  return "unknown operation";
}

std::string LedgerRecord::agreed() const {
  if (op == LedgerOp::kAllToAllV) {
    return fmt::format("alltoallv({})", Name(type));
  }
  if (op == LedgerOp::kSplit) return "split()";
  return str();
}

std::string LedgerRecord::where() const {
  if (harness) return "(disttest's, before the body)";
  const std::size_t slash = file.rfind('/');
  return fmt::format("at {}:{}",
                     slash == std::string::npos ? file : file.substr(slash + 1),
                     line);
}

std::string RankLedgerView::Making::str() const {
  const std::size_t slash = file.rfind('/');
  return fmt::format("{} of {} ranks at {}:{}", name, size,
                     slash == std::string::npos ? file : file.substr(slash + 1),
                     line);
}

bool LedgerRecord::SameCall(const LedgerRecord& o) const {
  if (op != o.op) return false;
  if (op == LedgerOp::kBarrier || op == LedgerOp::kSplit) return true;
  if (op == LedgerOp::kAllToAllV) return type == o.type;
  return type == o.type && count == o.count &&
         (!HasReduceOp(op) || reduce == o.reduce) &&
         (!HasRoot(op) || peer == o.peer) &&
         (op != LedgerOp::kAllGatherV || tag == o.tag);
}

RankPhase RankLedgerView::phase() const {
  for (std::size_t p = kPhases; p-- > 0;) {
    if (phase_ns[p] != 0) return static_cast<RankPhase>(p);
  }
  return RankPhase::kStarted;
}

std::string RankLedgerView::comm_name(std::uint32_t id) const {
  if (id < comms.size() && !comms[id].empty()) return comms[id];
  return fmt::format("communicator {}", id + 1);
}

std::uint64_t RankLedgerView::comm_key(std::uint32_t id) const {
  return id < keys.size() ? keys[id] : 0;
}

std::string CountsText(const std::uint64_t* first, std::uint64_t ranks,
                       std::uint32_t hash) {
  if (ranks == 0) return fmt::format("#{:08x}", hash);
  std::string text = "{";
  for (std::uint64_t i = 0; i < ranks && i < LedgerMemory::kCountsKept; ++i) {
    text += fmt::format("{}{}", i == 0 ? "" : ", ", first[i]);
  }
  if (ranks <= LedgerMemory::kCountsKept) return text + "}";
  return fmt::format("{}, ...}} ({} ranks, #{:08x})", text, ranks, hash);
}

std::string ShortName(std::string_view name, std::size_t most) {
  if (name.size() <= most) return std::string(name);
  // At a space, so that no word is cut ("world split 0 (color 1) split 0
  // (color 1) split 1 ..." rather than "... split 0 (color "), with "...".
  constexpr std::string_view kMore = " ...";
  std::size_t end = name.rfind(' ', most - kMore.size());
  if (end == std::string_view::npos || end == 0) end = most - kMore.size();
  return std::string(name.substr(0, end)) + std::string(kMore);
}

void Fold(CommDigest& into, const CommDigest& d) {
  if (d.calls == 0) return;
  if (into.calls == 0) {
    into = d;
    return;
  }
  into.calls += d.calls;
  into.digest += d.digest * 0x100000001b3ULL;
}

std::uint64_t MessageHash(int sender, int receiver, const Ledger::Call& c,
                          std::uint64_t seq) {
  // splitmix64's finalizer, chained: the balance is a sum of these, so each
  // must be well mixed on its own.
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  std::uint64_t h = mix(static_cast<std::uint32_t>(sender));
  h = mix(h ^ static_cast<std::uint32_t>(receiver));
  h = mix(h ^ c.tag);
  h = mix(h ^ seq);
  h = mix(h ^ static_cast<std::uint64_t>(c.type));
  return mix(h ^ c.count);
}

CommTransfers RankLedgerView::transfers_of(std::uint64_t key) const {
  CommTransfers out;
  for (std::size_t i = 0; i < keys.size() && i < transfers.size(); ++i) {
    if (keys[i] != key) continue;
    out.count += transfers[i].count;
    out.balance += transfers[i].balance;
    out.failed += transfers[i].failed;
  }
  return out;
}

CommDigest RankLedgerView::digest_of(std::uint64_t key) const {
  CommDigest out;
  for (std::size_t i = 0; i < keys.size() && i < digests.size(); ++i) {
    if (keys[i] == key) Fold(out, digests[i]);
  }
  return out;
}

}  // namespace disttest::internal
