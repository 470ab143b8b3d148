// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// LedgerMemory (comm/ledger.h): the ranks' areas in shared memory, made by
// the parent or attached by a re-executed rank, and what a reader sees in
// them (a rank's view, phase, progress, open collective, digests).
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/unordered_reads.h"
#include "comm/ledger.h"
#include "comm/ledger_area.h"
#include "comm/shared_memory.h"
#include "disttest/error.h"

namespace disttest::internal {

std::size_t LedgerMemory::AreaBytes(std::size_t ring) {
  return sizeof(Area) + ring * sizeof(Entry);
}

// The memory starts with what it holds, for Attach() to check.
struct LedgerMemory::Shape {
  alignas(64) std::uint32_t magic;
  std::uint32_t ranks;
  std::uint64_t ring;
};
namespace {
constexpr std::uint32_t kLedgerMagic = 0x474c5444;  // "DTLG"
}  // namespace

std::size_t LedgerMemory::SizeFor(int ranks, std::size_t ring) {
  return sizeof(Shape) + AreaBytes(ring) * static_cast<std::size_t>(ranks);
}

std::shared_ptr<LedgerMemory> LedgerMemory::Create(int ranks,
                                                   std::size_t ring) {
  if (ranks < 1 || ranks > kMaxRanks) {
    throw Error(fmt::format("a collective ledger takes 1 to {} ranks, not {}",
                            kMaxRanks, ranks));
  }
  if (ring < 1 || ring > kMaxRing) {
    throw Error(fmt::format(
        "a collective ledger keeps 1 to {} operations per rank, not {}",
        kMaxRing, ring));
  }
  const std::size_t size = SizeFor(ranks, ring);
  const SharedMemory m =
      MapShared("disttest-ledger", size, "a collective ledger");
  const int fd = m.fd;
  void* memory = m.memory;
  // Fresh pages are zero, which is an empty ledger: nothing to write but
  // its shape, and the pages no rank touches cost nothing.
  auto* shape = static_cast<Shape*>(memory);
  shape->magic = kLedgerMagic;
  shape->ranks = static_cast<std::uint32_t>(ranks);
  shape->ring = ring;
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, ring, fd, memory, size));
}

std::shared_ptr<LedgerMemory> LedgerMemory::Attach(int fd, int ranks) {
  struct stat st {};
  Shape shape{};
  const std::size_t size =
      fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  const bool read =
      size >= sizeof(Shape) &&
      pread(fd, &shape, sizeof shape, 0) == static_cast<ssize_t>(sizeof shape);
  if (!read || shape.magic != kLedgerMagic ||
      shape.ranks != static_cast<std::uint32_t>(ranks) || shape.ring < 1 ||
      shape.ring > kMaxRing || SizeFor(ranks, shape.ring) != size) {
    close(fd);
    throw Error(fmt::format(
        "descriptor {} is not a collective ledger for {} ranks ({} bytes)", fd,
        ranks, size));
  }
  const auto ring = static_cast<std::size_t>(shape.ring);
  void* memory = MapInherited(fd, size, "the collective ledger");
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, ring, -1, memory, size));
}

LedgerMemory::LedgerMemory(int ranks, std::size_t ring, int fd, void* memory,
                           std::size_t size)
    : ranks_(ranks), ring_(ring), fd_(fd), memory_(memory), size_(size) {}

LedgerMemory::~LedgerMemory() {
  munmap(memory_, size_);
  if (fd_ >= 0) close(fd_);
}

LedgerMemory::Area& LedgerMemory::area(int rank) const {
  return *reinterpret_cast<Area*>(static_cast<char*>(memory_) + sizeof(Shape) +
                                  AreaBytes(ring_) *
                                      static_cast<std::size_t>(rank));
}

bool LedgerMemory::DigestsAgree() const {
  std::unordered_map<std::uint64_t, CommDigest> seen;
  std::unordered_map<std::uint64_t, CommDigest> mine;
  // The sum of every rank's balance, by key: 0 when each message sent was
  // received as it was sent; not judged where a send or receive failed.
  std::unordered_map<std::uint64_t, std::uint64_t> balance;
  std::unordered_set<std::uint64_t> failed;
  // Each key's ranks there that some rank used in this test: two ranks that
  // are one rank of it are two communicators made alike, which the report
  // must tell (MismatchedCalls), as their calls cannot be compared.
  std::unordered_map<std::uint64_t, std::unordered_set<int>> taken;
  std::vector<std::pair<std::uint64_t, int>> mine_there;
  for (int r = 0; r < ranks_; ++r) {
    const Area& a = area(r);
    const std::uint32_t named = std::min<std::uint32_t>(
        a.named.load(std::memory_order_acquire), kComms);
    mine.clear();
    mine_there.clear();
    for (std::uint32_t i = 0; i < named; ++i) {
      const std::uint64_t key = a.keys[i];
      if (key == 0) continue;  // Not identified, or free: not compared.
      const CommDigest d{a.calls[i].load(std::memory_order_acquire),
                         a.digest[i].load(std::memory_order_relaxed)};
      const bool transferred =
          a.transfers[i].load(std::memory_order_acquire) > 0;
      if (d.calls > 0 || transferred)
        mine_there.emplace_back(key, a.comm_rank[i]);
      if (transferred) {
        balance[key] += a.balance[i].load(std::memory_order_relaxed);
      }
      if (a.transfers_failed[i].load(std::memory_order_acquire) > 0) {
        failed.insert(key);
      }
      auto [it, made] = mine.try_emplace(key, d);
      if (!made) Fold(it->second, d);
    }
    for (const auto& [key, d] : mine) {
      // A communicator it did not use in this test (made in an earlier one,
      // or one whose group it has left) says nothing.
      if (d.calls == 0) continue;
      auto [it, made] = seen.try_emplace(key, d);
      if (!made && !(it->second == d)) return false;
    }
    std::sort(mine_there.begin(), mine_there.end());
    mine_there.erase(std::unique(mine_there.begin(), mine_there.end()),
                     mine_there.end());
    for (const auto& [key, there] : mine_there) {
      if (!taken[key].insert(there).second) return false;
    }
  }
  return std::all_of(balance.begin(), balance.end(), [&](const auto& kb) {
    return kb.second == 0 || failed.count(kb.first) != 0;
  });
}

namespace {

// Entry `i`, when it is whole (not being written, not written over).
bool Copy(const Entry& e, std::uint64_t i, LedgerRecord* out) {
  const UnorderedReads seqlock;
  const std::uint64_t stamp = e.stamp.load(std::memory_order_acquire);
  if (stamp != i + 1) return false;
  LedgerRecord& r = *out;
  r.index = i;
  r.state = static_cast<LedgerState>(e.state.load(std::memory_order_acquire));
  r.ended_ns = e.ended_ns.load(std::memory_order_relaxed);
  r.seq = e.seq;
  r.count = e.count;
  r.entered_ns = e.entered_ns;
  r.comm = e.comm;
  r.tag = e.tag;
  r.line = e.line;
  r.peer = e.peer;
  r.op = static_cast<LedgerOp>(e.op);
  r.type = static_cast<DataType>(e.type);
  r.reduce = static_cast<ReduceOp>(e.reduce);
  r.harness = e.harness != 0;
  r.nonblocking = e.nonblocking != 0;
  r.file.assign(e.file, strnlen(e.file, LedgerMemory::kFileBytes));
  if (r.op == LedgerOp::kAllGatherV) {
    r.ranks = e.ranks;
    r.counts.assign(
        e.counts,
        e.counts + std::min<std::size_t>(e.ranks, LedgerMemory::kCountsKept));
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.stamp.load(std::memory_order_relaxed) != stamp) return false;
  return r.state == LedgerState::kEntered ||
         r.state == LedgerState::kCompleted || r.state == LedgerState::kFailed;
}

}  // namespace

std::optional<LedgerRecord> LedgerMemory::OpenCollective(int rank) const {
  if (rank < 0 || rank >= ranks_) return std::nullopt;
  const Area& a = area(rank);
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  if (written == 0 || written <= a.test_first.load(std::memory_order_acquire)) {
    return std::nullopt;
  }
  LedgerRecord r;
  if (!Copy(EntriesOf(a)[(written - 1) % ring_], written - 1, &r) ||
      !r.collective() || r.state != LedgerState::kEntered) {
    return std::nullopt;
  }
  return r;
}

std::optional<LedgerRecord> LedgerMemory::WaitingMessage(int rank) const {
  if (rank < 0 || rank >= ranks_) return std::nullopt;
  const Area& a = area(rank);
  const std::uint64_t blocked = a.blocked.load(std::memory_order_acquire);
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  // Entry blocked - 1, of this test, still in the ring.
  if (blocked == 0 || blocked <= a.test_first.load(std::memory_order_acquire) ||
      blocked > written || written - blocked >= ring_) {
    return std::nullopt;
  }
  LedgerRecord r;
  if (!Copy(EntriesOf(a)[(blocked - 1) % ring_], blocked - 1, &r) ||
      r.collective() || r.state != LedgerState::kEntered) {
    return std::nullopt;
  }
  return r;
}

bool LedgerMemory::InCollectiveSince(int rank, std::int64_t before_ns) const {
  const UnorderedReads seqlock;
  if (rank < 0 || rank >= ranks_) return false;
  const Area& a = area(rank);
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  if (written == 0 || written <= a.test_first.load(std::memory_order_acquire)) {
    return false;
  }
  const Entry& e = EntriesOf(a)[(written - 1) % ring_];
  const std::uint64_t stamp = e.stamp.load(std::memory_order_acquire);
  const auto op = static_cast<LedgerOp>(e.op);
  const auto state =
      static_cast<LedgerState>(e.state.load(std::memory_order_acquire));
  const std::int64_t entered = e.entered_ns;
  std::atomic_thread_fence(std::memory_order_acquire);
  return stamp == written && e.stamp.load(std::memory_order_relaxed) == stamp &&
         op != LedgerOp::kSend && op != LedgerOp::kRecv &&
         state == LedgerState::kEntered && entered < before_ns;
}

RankLedgerView LedgerMemory::Read(int rank, int as_rank) const {
  RankLedgerView view;
  view.rank = as_rank;
  if (rank < 0 || rank >= ranks_) return view;
  const Area& a = area(rank);
  view.read_ns = MonotonicNs();
  view.read_wall_ns = RealtimeNs();
  for (std::size_t p = 0; p < kPhases; ++p) {
    view.phase_ns[p] = a.phase_ns[p].load(std::memory_order_acquire);
  }
  const std::uint32_t named =
      std::min<std::uint32_t>(a.named.load(std::memory_order_acquire), kComms);
  for (std::uint32_t i = 0; i < named; ++i) {
    view.comms.emplace_back(a.names[i], strnlen(a.names[i], kNameBytes));
    view.keys.push_back(a.keys[i]);
    view.comm_ranks.push_back(a.comm_rank[i]);
    view.comm_sizes.push_back(a.comm_size[i]);
    // The count first: a digest read after it covers at least that many.
    const std::uint64_t calls = a.calls[i].load(std::memory_order_acquire);
    view.digests.push_back(
        {calls, a.digest[i].load(std::memory_order_relaxed)});
    const std::uint64_t transfers =
        a.transfers[i].load(std::memory_order_acquire);
    view.transfers.push_back(
        {transfers, a.balance[i].load(std::memory_order_relaxed),
         a.transfers_failed[i].load(std::memory_order_acquire)});
  }
  view.blocked = a.blocked.load(std::memory_order_acquire);
  view.threads = a.threads.load(std::memory_order_relaxed) != 0;
  if (const std::uint64_t making = a.making.load(std::memory_order_acquire);
      (making & 1) != 0 &&
      a.making_pid == a.pid.load(std::memory_order_relaxed)) {
    const UnorderedReads seqlock;
    RankLedgerView::Making m;
    m.key = a.making_key;
    m.rank = a.making_rank;
    m.size = a.making_size;
    m.since_ns = a.making_ns;
    m.line = a.making_line;
    m.file.assign(a.making_file, strnlen(a.making_file, kFileBytes));
    m.name.assign(a.making_name, strnlen(a.making_name, kNameBytes));
    // Kept only when no other began meanwhile (its fields rewritten).
    std::atomic_thread_fence(std::memory_order_acquire);
    if (a.making.load(std::memory_order_relaxed) == making) {
      view.making = std::move(m);
    }
  }
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  view.written = written;
  const std::uint64_t first =
      std::min(written, a.test_first.load(std::memory_order_acquire));
  const std::uint64_t from =
      std::max(first, written > ring_ ? written - ring_ : 0);
  view.dropped = from - first;
  for (std::uint64_t i = from; i < written; ++i) {
    LedgerRecord r;
    if (Copy(EntriesOf(a)[i % ring_], i, &r))
      view.records.push_back(std::move(r));
  }
  return view;
}

pid_t LedgerMemory::Pid(int rank) const {
  if (rank < 0 || rank >= ranks_) return 0;
  return area(rank).pid.load(std::memory_order_acquire);
}

pid_t LedgerMemory::Tid(int rank) const {
  if (rank < 0 || rank >= ranks_) return 0;
  return area(rank).tid.load(std::memory_order_acquire);
}

int LedgerMemory::EndedProcess(int rank) const {
  if (rank < 0 || rank >= ranks_) return 0;
  return area(rank).ended_process.load(std::memory_order_acquire);
}

RankPhase LedgerMemory::Phase(int rank) const {
  if (rank < 0 || rank >= ranks_) return RankPhase::kStarted;
  const Area& a = area(rank);
  for (std::size_t p = kPhases; p-- > 0;) {
    if (a.phase_ns[p].load(std::memory_order_acquire) != 0) {
      return static_cast<RankPhase>(p);
    }
  }
  return RankPhase::kStarted;
}

Progress LedgerMemory::ProgressOf(int rank) const {
  if (rank < 0 || rank >= ranks_) return {};
  const Area& a = area(rank);
  Progress p;
  p.written = a.written.load(std::memory_order_acquire);
  p.blocked = a.blocked.load(std::memory_order_acquire);
  p.timeout_ms = a.blocked_timeout_ms.load(std::memory_order_relaxed);
  p.threads = a.threads.load(std::memory_order_relaxed) != 0;
  p.making = a.making.load(std::memory_order_acquire);
  if ((p.making & 1) != 0 &&
      a.making_pid != a.pid.load(std::memory_order_relaxed)) {
    p.making = 0;  // Another process's (a forked child's).
  }
  if (p.blocked == 0 && (p.making & 1) != 0) {
    const UnorderedReads seqlock;  // Its fields stay while it is odd.
    p.timeout_ms = a.making_timeout_ms;
  }
  return p;
}

}  // namespace disttest::internal
