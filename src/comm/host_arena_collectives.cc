// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The collectives (barrier, allreduce, broadcast, allgather): each round
// meets at the barrier, compares every rank's call, and then reads the
// peers' slots; a timeout or a mismatch names what each rank called.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/host_arena.h"
#include "comm/host_arena_layout.h"
#include "comm/peer_errors.h"
#include "comm/reduce_elements.h"
#include "comm/visit_type.h"
#include "disttest/error.h"
#include "env/text.h"

namespace disttest {

namespace {

// The ranks `which`, grouped by their entry (what they called, and as
// which collective) of the round of `parity`, in order of their first rank.
template <typename PerRank>
auto ByEntry(const PerRank* ranks, const std::vector<int>& which,
             unsigned parity) {
  using Entry = std::decay_t<decltype(ranks[0].entries[0])>;
  std::vector<std::pair<Entry, std::vector<int>>> groups;
  for (int q : which) {
    const Entry& entry = ranks[q].entries[parity];
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.first.seq == entry.seq && g.first.call == entry.call;
    });
    if (same == groups.end()) {
      groups.push_back({entry, {q}});
    } else {
      same->second.push_back(q);
    }
  }
  return groups;
}

// out = out `op` in, as every backend that reduces on the host does.
void ReduceAs(DataType type, void* out, const void* in, std::size_t n,
              ReduceOp op) {
  if (type == DataType::kBool) {
    auto* bytes = static_cast<std::uint8_t*>(out);
    internal::ReduceElements(internal::LogicalOp(op), bytes, bytes,
                             static_cast<const std::uint8_t*>(in), n);
    return;
  }
  internal::VisitType(type, [&]<typename T>(T*) {
    if constexpr (!std::is_same_v<T, bool>) {
      internal::ReduceElements(op, static_cast<T*>(out),
                               static_cast<const T*>(out),
                               static_cast<const T*>(in), n);
    }
  });
}

}  // namespace

unsigned char* HostArena::Slot(int rank, unsigned parity, std::size_t bytes) {
  if (bytes <= kSmallBytes) return ranks_[rank].small[parity];
  return static_cast<unsigned char*>(memory_) + HeaderBytes(world_) +
         (static_cast<std::size_t>(rank) * 2 + parity) * kSlotBytes;
}

std::uint64_t HostArena::NextSequence(int rank) { return ranks_[rank].ops++; }

unsigned HostArena::NextRound(int rank) {
  return static_cast<unsigned>(ranks_[rank].rounds++ & 1u);
}

void HostArena::Barrier(int rank, std::chrono::milliseconds timeout) {
  Meet(rank, CollectiveCall::Barrier(), NextSequence(rank), NextRound(rank),
       Deadline(timeout));
}

void HostArena::Check(int rank, const CollectiveCall& call,
                      std::chrono::milliseconds timeout) {
  Meet(rank, call, NextSequence(rank), NextRound(rank), Deadline(timeout));
}

void HostArena::Meet(int rank, const CollectiveCall& call, std::uint64_t seq,
                     unsigned parity, const Deadline& deadline) {
  // Before this rank's entry is written: a rank gets ahead of its peers
  // only through a collective that failed, and then it must not overwrite
  // the entry of the round they may still compare (the entries alternate
  // between two rounds).
  ThrowIfUnusable();
  if (!check_calls_) return Wait(rank, deadline);
  ranks_[rank].entries[parity] = {call, seq};
  // The barrier's release and acquire order the entries (and the data slots)
  // before every peer's reads.
  Wait(rank, deadline, static_cast<int>(parity));
  for (int q = 0; q < world_; ++q) {
    const Header::Entry& theirs = ranks_[q].entries[parity];
    if (theirs.seq != seq || !(theirs.call == call))
      Mismatch(rank, seq, parity);
  }
}

void HostArena::Mismatch(int rank, std::uint64_t seq, unsigned parity) {
  Header& h = *header_;
  std::uint64_t none = 0;
  h.mismatch.compare_exchange_strong(none, seq + 1, std::memory_order_acq_rel);
  std::vector<int> all(world_);
  std::iota(all.begin(), all.end(), 0);
  std::string calls;
  for (const auto& [entry, ranks] : ByEntry(ranks_, all, parity)) {
    if (!calls.empty()) calls += "; ";
    if (entry.seq == UINT64_MAX) {
      // Its entry of this round was never written.
      calls += fmt::format("{}: no call recorded", internal::RanksText(ranks));
      continue;
    }
    calls +=
        fmt::format("{}: {}", internal::RanksText(ranks), entry.call.str());
    if (entry.seq != seq)
      calls += fmt::format(" as its collective #{}", entry.seq);
  }
  throw internal::MismatchOfCalls(
      fmt::format("collective #{} does not match across the {} ranks: {}", seq,
                  world_, calls),
      rank);
}

std::string HostArena::LastCalls(const std::vector<int>& missing,
                                 unsigned parity) const {
  std::string text;
  for (const auto& [entry, ranks] : ByEntry(ranks_, missing, parity)) {
    if (!text.empty()) text += "; ";
    const std::string who = internal::RanksText(ranks);
    text += entry.seq == UINT64_MAX
                ? fmt::format("{} {} entered no collective", who,
                              ranks.size() == 1 ? "has" : "have")
                : fmt::format("{}'s last collective was #{} {}", who, entry.seq,
                              entry.call.str());
  }
  return text;
}

void HostArena::Wait(int rank, const Deadline& deadline, int parity) {
  Header& h = *header_;
  ThrowIfUnusable();
  const std::uint32_t generation = h.generation.load(std::memory_order_acquire);
  const std::uint64_t mine =
      ranks_[rank].arrivals.fetch_add(1, std::memory_order_relaxed) + 1;
  if (h.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(world_)) {
    h.arrived.store(0, std::memory_order_relaxed);
    h.generation.fetch_add(1, std::memory_order_acq_rel);
    internal::FutexWakeAll(&h.generation);
    return;
  }
  // Gives up this wait: from now on every wait in the arena fails (this
  // rank's arrival stays counted), unless the barrier completed meanwhile.
  const auto give_up = [&](CommError why) {
    GiveUp(rank);
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    throw why;
  };
  for (;;) {
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    // Sends and receives posted before the collective move on while it
    // waits (a peer may wait in its send for this rank's posted receive):
    // looked at every millisecond while there are any.
    long long poll_ns = 100'000'000;
    if (in_flight_[rank].load(std::memory_order_relaxed) > 0) {
      bool moving = false;
      try {
        moving = ProgressWhileInACollective(rank);
      } catch (const std::exception& e) {
        return give_up(CommError(fmt::format(
            "moving this rank's sends and receives on failed: {}", e.what())));
      }
      if (moving) poll_ns = 1'000'000;
    }
    if (std::int32_t ended = h.ended.load(std::memory_order_acquire)) {
      return give_up(internal::ErrorOfAPeer(
          fmt::format("rank {} {}", ended - 1, internal::kPeerEnded)));
    }
    ThrowIfUnusable();
    const auto left = deadline.at - Clock::now();
    if (left <= Clock::duration::zero()) {
      std::vector<int> missing;
      for (int q = 0; q < world_; ++q) {
        if (ranks_[q].arrivals.load(std::memory_order_relaxed) < mine) {
          missing.push_back(q);
        }
      }
      // A missing rank has not arrived in this round, so it no longer
      // writes its entry of the round before: that one is safe to read.
      const std::string last =
          parity >= 0
              ? ": " + LastCalls(missing, static_cast<unsigned>(parity) ^ 1u)
              : std::string();
      return give_up(CommError(fmt::format(
          "timed out after {} ms waiting for {} (same-host arena){}",
          deadline.timeout.count(), internal::RanksText(missing), last)));
    }
    // Wake now and then even without a futex wake, to check the deadline
    // and whether a peer has ended.
    const long long ns =
        std::min<long long>(std::chrono::nanoseconds(left).count(), poll_ns);
    internal::FutexWait(&h.generation, generation, ns);
  }
}

void HostArena::AllReduce(int rank, void* data, std::size_t count,
                          DataType type, ReduceOp op,
                          std::chrono::milliseconds timeout,
                          const CollectiveCall* as) {
  const Deadline deadline(timeout);
  const CollectiveCall call =
      as != nullptr ? *as : CollectiveCall::AllReduce(count, type, op);
  const std::uint64_t seq = NextSequence(rank);
  const std::size_t size = SizeOf(type);
  // An empty collective still meets and is checked: an empty one against a
  // full one is a mismatch, not a hang. Its buffer may be null.
  if (count == 0) return Meet(rank, call, seq, NextRound(rank), deadline);
  auto* out = static_cast<unsigned char*>(data);
  const bool whole =
      count * size * static_cast<std::size_t>(world_) <= kWholeReduceBytes;
  const std::size_t per_round = kSlotBytes / size;
  for (std::size_t done = 0; done < count; done += per_round) {
    const std::size_t n = std::min(per_round, count - done);
    unsigned char* chunk = out + done * size;
    const unsigned parity = NextRound(rank);
    const auto slot = [&](int q) { return Slot(q, parity, n * size); };
    std::memcpy(slot(rank), chunk, n * size);
    Meet(rank, call, seq, parity, deadline);
    if (whole) {
      // Every rank reduces every slot, in rank order.
      std::memcpy(chunk, slot(0), n * size);
      for (int q = 1; q < world_; ++q) {
        ReduceAs(type, chunk, slot(q), n, op);
      }
      continue;
    }
    // Rank r reduces share r of every slot (in rank order, into its own
    // buffer), puts the result into share r of its slot, which only it reads
    // (a peer reads share q of every slot), then everyone copies the shares.
    const auto share = [&](int q) {
      return std::pair{n * static_cast<std::size_t>(q) / world_,
                       n * static_cast<std::size_t>(q + 1) / world_};
    };
    const auto [lo, hi] = share(rank);
    if (hi > lo) {
      std::memcpy(chunk + lo * size, slot(0) + lo * size, (hi - lo) * size);
      for (int q = 1; q < world_; ++q) {
        ReduceAs(type, chunk + lo * size, slot(q) + lo * size, hi - lo, op);
      }
      std::memcpy(slot(rank) + lo * size, chunk + lo * size, (hi - lo) * size);
    }
    Wait(rank, deadline);
    for (int q = 0; q < world_; ++q) {
      const auto [qlo, qhi] = share(q);
      if (q == rank || qhi == qlo) continue;
      std::memcpy(chunk + qlo * size, slot(q) + qlo * size, (qhi - qlo) * size);
    }
  }
}

void HostArena::Broadcast(int rank, void* data, std::size_t count,
                          DataType type, int root,
                          std::chrono::milliseconds timeout,
                          const CollectiveCall* as) {
  const Deadline deadline(timeout);
  const CollectiveCall call =
      as != nullptr ? *as : CollectiveCall::Broadcast(count, type, root);
  const std::uint64_t seq = NextSequence(rank);
  const std::size_t bytes = count * SizeOf(type);
  auto* buffer = static_cast<unsigned char*>(data);
  // At least one round, for an empty broadcast too.
  std::size_t done = 0;
  do {
    const std::size_t n = std::min(kSlotBytes, bytes - done);
    const unsigned parity = NextRound(rank);
    if (rank == root && n > 0)
      std::memcpy(Slot(root, parity, n), buffer + done, n);
    Meet(rank, call, seq, parity, deadline);
    if (rank != root && n > 0)
      std::memcpy(buffer + done, Slot(root, parity, n), n);
    done += n;
  } while (done < bytes);
}

void HostArena::AllGather(int rank, const void* in, void* out,
                          std::size_t count, DataType type,
                          std::chrono::milliseconds timeout,
                          const CollectiveCall* as) {
  const Deadline deadline(timeout);
  const CollectiveCall call =
      as != nullptr ? *as : CollectiveCall::AllGather(count, type);
  const std::uint64_t seq = NextSequence(rank);
  const std::size_t bytes = count * SizeOf(type);
  const auto* mine = static_cast<const unsigned char*>(in);
  auto* all = static_cast<unsigned char*>(out);
  std::size_t done = 0;
  do {
    const std::size_t n = std::min(kSlotBytes, bytes - done);
    const unsigned parity = NextRound(rank);
    if (n > 0) std::memcpy(Slot(rank, parity, n), mine + done, n);
    Meet(rank, call, seq, parity, deadline);
    for (int q = 0; q < world_ && n > 0; ++q) {
      std::memcpy(all + q * bytes + done, Slot(q, parity, n), n);
    }
    done += n;
  } while (done < bytes);
}

}  // namespace disttest
