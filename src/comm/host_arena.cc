// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/host_arena.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/shared_memory.h"
#include "comm/visit_type.h"
#include "disttest/error.h"
#include "env/text.h"

namespace disttest {

// The barrier is a counter and a generation number: the last rank to arrive
// resets the counter and bumps the generation, on which the others wait
// (a futex: the memory is shared between processes). `ended` holds 1 + the
// first rank said to have ended.
//
// A send goes through the sender's mailbox (host_arena.h): posts in a ring
// in its PerRank, bytes in its heap. Only the sender writes a post; it
// publishes post i by writing its stamp (i + 1) and then `posted`. The post's
// receiver, and no one else, sets its state to taken or refused; the sender
// reuses it (and its bytes) only after that. A receiver reads a post it does
// not own between two reads of its stamp, so a post reused meanwhile is
// seen as such. A rank that waits in a send or receive sleeps on its own
// `doorbell`, which whoever changes what it waits for rings; `waiting_on`
// says for whom, so that MarkEnded() wakes exactly those that wait for the
// rank that ended.
struct HostArena::Header {
  // What a rank called as its collective `seq`.
  struct Entry {
    CollectiveCall call;
    // Never a real sequence number: a rank that never wrote its entry
    // matches nobody's call.
    std::uint64_t seq = UINT64_MAX;
  };
  // A message as its sender describes it, or as its receiver expected it.
  struct Message {
    std::uint64_t count = 0;
    DataType type = DataType::kUint8;
    std::uint32_t tag = 0;
    bool operator==(const Message&) const = default;
  };
  alignas(64) std::atomic<std::uint32_t> arrived{0};
  alignas(64) std::atomic<std::uint32_t> generation{0};
  alignas(64) std::atomic<std::int32_t> ended{0};
  // 1 + the first rank whose wait failed. Its arrival is still counted in
  // a barrier that never completed, so the arena cannot be used again.
  std::atomic<std::int32_t> failed{0};
  // 1 + the sequence number of the first collective that did not match.
  std::atomic<std::uint64_t> mismatch{0};

  // A pool's last test handed out, its name's size (kNameInStore: in the
  // store) and its name.
  alignas(64) std::atomic<std::uint32_t> dispatched{0};
  std::atomic<std::uint32_t> name_size{0};
  char test_name[kTestNameBytes];
};

// One piece of a message, as its sender posted it.
struct HostArena::Post {
  enum State : std::uint32_t { kOpen = 0, kTaken = 1, kRefused = 2 };
  // i + 1 once post i is whole in this place; read before and after the
  // rest by whoever does not own it.
  std::atomic<std::uint64_t> stamp{0};
  std::atomic<std::uint32_t> state{kOpen};
  std::int32_t to = -1;
  Header::Message message;    // The whole message's count, type and tag.
  std::uint64_t number = 0;   // The sender's message number (from 1).
  std::uint64_t offset = 0;   // Bytes of the message before this piece.
  std::uint64_t bytes = 0;    // In this piece.
  std::uint64_t heap_at = 0;  // Where they are in the sender's heap.
  Header::Message expected;   // A receiver that refused: what it expected.
};

struct alignas(64) HostArena::PerRank {
  // Barriers this rank has entered: who is missing, on a timeout.
  std::atomic<std::uint64_t> arrivals{0};
  // Collectives this rank has entered: the next one's sequence number.
  // Written only by the rank itself, as is `rounds`.
  std::uint64_t ops = 0;
  // Rounds this rank has entered (a collective takes one or more).
  std::uint64_t rounds = 0;
  // Its last two rounds' calls, by parity: a fast rank writes the next
  // while a slow one may still read the last.
  Header::Entry entries[2];
  // Its data for a round of up to kSmallBytes, by parity, beside the call:
  // peers that read every rank's data touch a few pages, not one per rank.
  alignas(64) unsigned char small[2][kSmallBytes];

  // The pooled test this rank waits for (Park()), 0: none.
  std::atomic<std::uint32_t> parked{0};
  // Set by MarkEnded(), and by MarkLeft().
  std::atomic<std::uint32_t> ended{0};
  std::atomic<std::uint32_t> left{0};
  // The peer this rank waits for in a send or receive, or -1.
  std::atomic<std::int32_t> waiting_on{-1};
  std::atomic<std::uint32_t> doorbell{0};

  // Its mailbox: post i is posts[i % kPosts]; those before `reclaimed` are
  // free again (only this rank writes both counters).
  std::atomic<std::uint64_t> posted{0};
  std::atomic<std::uint64_t> reclaimed{0};
  Post posts[kPosts];
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free,
              "the arena's atomics must work across processes");

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

// Waits while *word == expected, at most `ns`; shared (not private) futex.
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               long long ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000),
              static_cast<long>(ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT,
          expected, &ts, nullptr, 0);
}

// "8 x float32 with tag 1"
std::string Describe(std::uint64_t count, DataType type, std::uint32_t tag) {
  return fmt::format("{} x {} with tag {}", count, Name(type), tag);
}

void FutexWakeAll(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE,
          INT_MAX, nullptr, nullptr, 0);
}

template <typename T>
void Reduce(T* out, const T* in, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // The division comes after (DivideBy).
      for (std::size_t i = 0; i < n; ++i) out[i] = out[i] + in[i];
      return;
    case ReduceOp::kProd:
      for (std::size_t i = 0; i < n; ++i) out[i] = out[i] * in[i];
      return;
    case ReduceOp::kMin:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::min(out[i], in[i]);
      return;
    case ReduceOp::kMax:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::max(out[i], in[i]);
      return;
  }
}

void ReduceAs(DataType type, void* out, const void* in, std::size_t n,
              ReduceOp op) {
  if (type == DataType::kBool) {
    Reduce(static_cast<std::uint8_t*>(out),
           static_cast<const std::uint8_t*>(in), n, internal::LogicalOp(op));
    return;
  }
  internal::VisitType(type, [&]<typename T>(T*) {
    if constexpr (!std::is_same_v<T, bool>) {
      Reduce(static_cast<T*>(out), static_cast<const T*>(in), n, op);
    }
  });
}

}  // namespace

// The header and one PerRank per rank, rounded up to a page.
std::size_t HostArena::HeaderBytes(int world) {
  return (RanksOffset() + static_cast<std::size_t>(world) * sizeof(PerRank) +
          4095) /
         4096 * 4096;
}

std::size_t HostArena::RanksOffset() {
  return (sizeof(Header) + alignof(PerRank) - 1) / alignof(PerRank) *
         alignof(PerRank);
}

std::size_t HostArena::SizeFor(int world, bool carry_data) {
  // Two slots for collectives and a mailbox's heap per rank.
  return HeaderBytes(world) + (carry_data ? static_cast<std::size_t>(world) *
                                                (2 * kSlotBytes + kHeapBytes)
                                          : 0);
}

std::shared_ptr<HostArena> HostArena::Create(int world, bool carry_data) {
  if (world < 1 || world > kMaxRanks) {
    throw Error(fmt::format("a host arena takes 1 to {} ranks, not {}",
                            kMaxRanks, world));
  }
  const std::size_t size = SizeFor(world, carry_data);
  const internal::SharedMemory m =
      internal::MapShared("disttest-arena", size, "a host arena");
  return std::shared_ptr<HostArena>(
      new HostArena(world, m.fd, m.memory, size, /*fresh=*/true, carry_data));
}

std::shared_ptr<HostArena> HostArena::Attach(int fd, int world) {
  struct stat st {};
  const bool valid = world >= 1 && world <= kMaxRanks;
  const std::size_t size = valid ? SizeFor(world, true) : 0;
  const std::size_t checks_only = valid ? SizeFor(world, false) : 0;
  if (!valid || fstat(fd, &st) != 0 ||
      (static_cast<std::size_t>(st.st_size) != size &&
       static_cast<std::size_t>(st.st_size) != checks_only)) {
    close(fd);
    throw Error(fmt::format(
        "descriptor {} is not a host arena for {} ranks (expected {} or {} "
        "bytes)",
        fd, world, size, checks_only));
  }
  const bool carry_data = static_cast<std::size_t>(st.st_size) == size;
  const std::size_t mapped = static_cast<std::size_t>(st.st_size);
  void* memory = internal::MapInherited(fd, mapped, "the host arena");
  return std::shared_ptr<HostArena>(
      new HostArena(world, -1, memory, mapped, /*fresh=*/false, carry_data));
}

HostArena::HostArena(int world, int fd, void* memory, std::size_t size,
                     bool fresh, bool carry_data)
    : world_(world),
      carry_data_(carry_data),
      fd_(fd),
      memory_(memory),
      size_(size),
      header_(fresh ? new (memory) Header
                    : std::launder(reinterpret_cast<Header*>(memory))) {
  auto* at = static_cast<unsigned char*>(memory) + RanksOffset();
  if (fresh) {
    for (int r = 0; r < world; ++r) new (at + r * sizeof(PerRank)) PerRank;
  }
  ranks_ = std::launder(reinterpret_cast<PerRank*>(at));
  mailboxes_.resize(static_cast<std::size_t>(world));
}

HostArena::~HostArena() {
  munmap(memory_, size_);
  if (fd_ >= 0) close(fd_);
}

void HostArena::MarkEnded(int rank) {
  Header& h = *header_;
  ranks_[rank].ended.store(1, std::memory_order_seq_cst);
  std::int32_t none = 0;
  h.ended.compare_exchange_strong(none, rank + 1, std::memory_order_acq_rel);
  FutexWakeAll(&h.generation);
  // Only the ranks that wait for it in a send or receive: at the end of a
  // test, when every rank ends, none does and this costs no system call.
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].waiting_on.load(std::memory_order_seq_cst) == rank) Ring(q);
  }
}

void HostArena::MarkLeft(int rank) {
  ranks_[rank].left.store(1, std::memory_order_seq_cst);
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].waiting_on.load(std::memory_order_seq_cst) == rank) Ring(q);
  }
}

namespace {
constexpr std::uint32_t kNameInStore = UINT32_MAX;
}  // namespace

void HostArena::Park(int rank, std::uint32_t n) {
  ranks_[rank].parked.store(n, std::memory_order_release);
}

bool HostArena::AllParked(std::uint32_t n) const {
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].parked.load(std::memory_order_acquire) != n) return false;
  }
  return true;
}

void HostArena::Dispatch(std::uint32_t n, const std::string& name) {
  Header& h = *header_;
  // Every rank has parked for `n`: none reads the last name any more.
  if (name.size() > kTestNameBytes) {
    h.name_size.store(kNameInStore, std::memory_order_relaxed);
  } else {
    std::memcpy(h.test_name, name.data(), name.size());
    h.name_size.store(static_cast<std::uint32_t>(name.size()),
                      std::memory_order_relaxed);
  }
  h.dispatched.store(n, std::memory_order_release);
  FutexWakeAll(&h.dispatched);
}

std::optional<std::string> HostArena::AwaitTest(std::uint32_t n) {
  Header& h = *header_;
  for (;;) {
    const std::uint32_t now = h.dispatched.load(std::memory_order_acquire);
    if (now >= n) break;
    FutexWait(&h.dispatched, now, 1'000'000'000LL);
  }
  const std::uint32_t size = h.name_size.load(std::memory_order_relaxed);
  if (size == kNameInStore) return std::nullopt;
  return std::string(h.test_name, size);
}

void HostArena::Ring(int rank) {
  PerRank& r = ranks_[rank];
  r.doorbell.fetch_add(1, std::memory_order_seq_cst);
  // A rank not (yet) waiting reads what changed before it sleeps on the
  // doorbell; one already asleep published waiting_on first.
  if (r.waiting_on.load(std::memory_order_seq_cst) >= 0) {
    FutexWakeAll(&r.doorbell);
  }
}

unsigned char* HostArena::Slot(int rank, unsigned parity, std::size_t bytes) {
  if (bytes <= kSmallBytes) return ranks_[rank].small[parity];
  return static_cast<unsigned char*>(memory_) + HeaderBytes(world_) +
         (static_cast<std::size_t>(rank) * 2 + parity) * kSlotBytes;
}

unsigned char* HostArena::Heap(int rank) {
  return static_cast<unsigned char*>(memory_) + HeaderBytes(world_) +
         static_cast<std::size_t>(world_) * 2 * kSlotBytes +
         static_cast<std::size_t>(rank) * kHeapBytes;
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

void HostArena::ThrowIfUnusable() {
  Header& h = *header_;
  if (std::uint64_t bad = h.mismatch.load(std::memory_order_acquire)) {
    throw CommError(fmt::format(
        "collective #{} {}; the host arena cannot be used after that", bad - 1,
        internal::kPeerSawMismatch));
  }
  if (std::int32_t failed = h.failed.load(std::memory_order_acquire)) {
    // A peer that ended is why the first waiter gave up: name it, as that
    // waiter did, rather than the waiter.
    if (std::int32_t ended = h.ended.load(std::memory_order_acquire)) {
      throw CommError(
          fmt::format("rank {} {}", ended - 1, internal::kPeerEnded));
    }
    throw CommError(
        fmt::format("rank {} {}; the arena cannot be used after that",
                    failed - 1, internal::kPeerGaveUp));
  }
}

void HostArena::GiveUp(int rank) {
  Header& h = *header_;
  std::int32_t none = 0;
  h.failed.compare_exchange_strong(none, rank + 1, std::memory_order_acq_rel);
  FutexWakeAll(&h.generation);
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
    if (theirs.seq != seq || !(theirs.call == call)) Mismatch(seq, parity);
  }
}

void HostArena::Mismatch(std::uint64_t seq, unsigned parity) {
  Header& h = *header_;
  std::uint64_t none = 0;
  h.mismatch.compare_exchange_strong(none, seq + 1, std::memory_order_acq_rel);
  std::vector<int> all(world_);
  std::iota(all.begin(), all.end(), 0);
  std::string calls;
  for (const auto& [entry, ranks] : ByEntry(ranks_, all, parity)) {
    if (!calls.empty()) calls += "; ";
    calls +=
        fmt::format("{}: {}", internal::RanksText(ranks), entry.call.str());
    if (entry.seq != seq)
      calls += fmt::format(" as its collective #{}", entry.seq);
  }
  throw CommError(
      fmt::format("collective #{} does not match across the {} ranks: {}", seq,
                  world_, calls));
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
    FutexWakeAll(&h.generation);
    return;
  }
  // Gives up this wait: from now on every wait in the arena fails (this
  // rank's arrival stays counted), unless the barrier completed meanwhile.
  const auto give_up = [&](const std::string& why) {
    GiveUp(rank);
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    throw CommError(why);
  };
  for (;;) {
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    if (std::int32_t ended = h.ended.load(std::memory_order_acquire)) {
      return give_up(
          fmt::format("rank {} {}", ended - 1, internal::kPeerEnded));
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
      return give_up(fmt::format(
          "timed out after {} ms waiting for {} (same-host arena){}",
          deadline.timeout.count(), internal::RanksText(missing), last));
    }
    // Wake now and then even without a futex wake, to check the deadline
    // and whether a peer has ended.
    const long long ns = std::min<long long>(
        std::chrono::nanoseconds(left).count(), 100'000'000);
    FutexWait(&h.generation, generation, ns);
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

// What a rank has in flight, in its own process.
struct HostArena::Mailbox {
  struct Op {
    std::uint64_t id = 0;
    bool send = false;
    int peer = 0;
    Header::Message message;        // Its count, type and tag.
    unsigned char* data = nullptr;  // A send's is only read.
    std::uint64_t bytes = 0;
    std::uint64_t pieces = 1;  // At least one, for an empty message.
    // A send's message number, from 1; a receive's match (0: none yet).
    std::uint64_t number = 0;
    std::uint64_t posted = 0;    // A send's pieces posted,
    std::uint64_t settled = 0;   // and taken (or refused) since.
    std::uint64_t received = 0;  // A receive's pieces taken.
    std::string error;           // Why it failed.

    bool done() const {
      return send ? posted == pieces && settled == pieces
                  : number != 0 && received == pieces;
    }
  };
  // What this rank's post i (in sent[i % kPosts]) belongs to.
  struct Sent {
    std::uint64_t id = 0;
    std::uint64_t heap_end = 0;  // heap_used after its bytes.
    bool settled = false;
  };

  std::deque<Op> ops;  // In the order they were made.
  std::uint64_t next_id = 1;
  std::uint64_t next_number = 1;
  // Bytes of the heap handed out and given back so far, as running totals:
  // the heap is a ring, its bytes given back in the order handed out.
  std::uint64_t heap_used = 0;
  std::uint64_t heap_freed = 0;
  Sent sent[kPosts];

  std::deque<Op>::iterator Find(std::uint64_t id) {
    return std::find_if(ops.begin(), ops.end(),
                        [id](const Op& op) { return op.id == id; });
  }
};

namespace {
// A post as a reader that does not own it saw it: whole, or not at all.
struct PostView {
  std::int32_t to = -1;
  std::uint64_t count = 0;
  DataType type = DataType::kUint8;
  std::uint32_t tag = 0;
  std::uint64_t number = 0, offset = 0, bytes = 0, heap_at = 0;
  std::uint32_t state = 0;
};
}  // namespace

HostArena::Mailbox& HostArena::MailboxOf(int rank) {
  std::unique_ptr<Mailbox>& box = mailboxes_[static_cast<std::size_t>(rank)];
  if (box == nullptr) box = std::make_unique<Mailbox>();
  return *box;
}

namespace {
template <typename PostT>
bool ReadPost(const PostT& p, std::uint64_t index, PostView* view) {
  if (p.stamp.load(std::memory_order_acquire) != index + 1) return false;
  view->to = p.to;
  view->count = p.message.count;
  view->type = p.message.type;
  view->tag = p.message.tag;
  view->number = p.number;
  view->offset = p.offset;
  view->bytes = p.bytes;
  view->heap_at = p.heap_at;
  view->state = p.state.load(std::memory_order_acquire);
  std::atomic_thread_fence(std::memory_order_acquire);
  // Reused meanwhile (it was taken, and its sender moved on): not this one.
  return p.stamp.load(std::memory_order_relaxed) == index + 1;
}
}  // namespace

void HostArena::ProgressSends(int rank, Mailbox& box) {
  PerRank& me = ranks_[rank];
  std::uint64_t next = me.posted.load(std::memory_order_relaxed);
  std::uint64_t reclaimed = me.reclaimed.load(std::memory_order_relaxed);
  // What the receivers took or refused since.
  for (std::uint64_t i = reclaimed; i < next; ++i) {
    Mailbox::Sent& sent = box.sent[i % kPosts];
    if (sent.settled) continue;
    const Post& p = me.posts[i % kPosts];
    const std::uint32_t state = p.state.load(std::memory_order_acquire);
    if (state == Post::kOpen) continue;
    sent.settled = true;
    auto op = box.Find(sent.id);
    if (op == box.ops.end()) continue;
    ++op->settled;
    if (state == Post::kRefused && op->error.empty()) {
      op->error = fmt::format(
          "rank {} sent {}; rank {} expected {}", rank,
          Describe(op->message.count, op->message.type, op->message.tag),
          op->peer,
          Describe(p.expected.count, p.expected.type, p.expected.tag));
    }
  }
  // Posts and heap bytes come back in the order they went.
  while (reclaimed < next && box.sent[reclaimed % kPosts].settled) {
    box.heap_freed = box.sent[reclaimed % kPosts].heap_end;
    ++reclaimed;
  }
  me.reclaimed.store(reclaimed, std::memory_order_release);
  // Sends post their pieces in the order they were made, as room allows.
  for (Mailbox::Op& op : box.ops) {
    if (!op.send || !op.error.empty()) continue;
    while (op.posted < op.pieces) {
      if (next - reclaimed >= kPosts) return;
      const std::uint64_t offset = op.posted * kPieceBytes;
      const std::uint64_t n =
          std::min<std::uint64_t>(kPieceBytes, op.bytes - offset);
      // A piece is never split at the heap's end.
      std::uint64_t at = box.heap_used % kHeapBytes;
      const std::uint64_t skip = at + n > kHeapBytes ? kHeapBytes - at : 0;
      if (box.heap_used + skip + n - box.heap_freed > kHeapBytes) return;
      box.heap_used += skip;
      at = box.heap_used % kHeapBytes;
      if (n > 0) std::memcpy(Heap(rank) + at, op.data + offset, n);
      box.heap_used += n;
      Post& p = me.posts[next % kPosts];
      p.state.store(Post::kOpen, std::memory_order_relaxed);
      p.to = op.peer;
      p.message = op.message;
      p.number = op.number;
      p.offset = offset;
      p.bytes = n;
      p.heap_at = at;
      p.stamp.store(next + 1, std::memory_order_release);
      box.sent[next % kPosts] = {op.id, box.heap_used, false};
      ++next;
      ++op.posted;
      me.posted.store(next, std::memory_order_release);
      Ring(op.peer);
    }
  }
}

void HostArena::ProgressRecvs(int rank, Mailbox& box) {
  for (auto it = box.ops.begin(); it != box.ops.end(); ++it) {
    Mailbox::Op& op = *it;
    if (op.send || !op.error.empty() || op.done()) continue;
    PerRank& sender = ranks_[op.peer];
    const std::uint64_t posted = sender.posted.load(std::memory_order_acquire);
    const std::uint64_t from = sender.reclaimed.load(std::memory_order_acquire);
    if (op.number == 0) {
      // Receives from one peer with one tag match its messages in order:
      // one made earlier that has none yet gets the next.
      const bool earlier = std::any_of(box.ops.begin(), it, [&](const auto& o) {
        return !o.send && o.peer == op.peer &&
               o.message.tag == op.message.tag && o.number == 0 &&
               o.error.empty();
      });
      if (earlier) continue;
      for (std::uint64_t i = from; i < posted; ++i) {
        PostView v;
        if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
        if (v.to != rank || v.offset != 0 || v.state != Post::kOpen ||
            v.tag != op.message.tag) {
          continue;
        }
        Post& p = sender.posts[i % kPosts];  // This rank's to settle now.
        if (v.count != op.message.count || v.type != op.message.type) {
          p.expected = op.message;
          p.state.store(Post::kRefused, std::memory_order_release);
          Ring(op.peer);
          op.error = fmt::format(
              "rank {} sent {}; rank {} expected {}", op.peer,
              Describe(v.count, v.type, v.tag), rank,
              Describe(op.message.count, op.message.type, op.message.tag));
          break;
        }
        op.number = v.number;
        break;
      }
      if (op.number == 0) continue;
    }
    // Its pieces, in order.
    while (op.received < op.pieces) {
      bool took = false;
      for (std::uint64_t i = from; i < posted && !took; ++i) {
        PostView v;
        if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
        if (v.to != rank || v.number != op.number ||
            v.offset != op.received * kPieceBytes || v.state != Post::kOpen) {
          continue;
        }
        if (v.bytes > 0) {
          std::memcpy(op.data + v.offset, Heap(op.peer) + v.heap_at, v.bytes);
        }
        sender.posts[i % kPosts].state.store(Post::kTaken,
                                             std::memory_order_release);
        Ring(op.peer);
        ++op.received;
        took = true;
      }
      if (!took) break;
    }
  }
}

void HostArena::Progress(int rank) {
  Mailbox& box = MailboxOf(rank);
  ProgressRecvs(rank, box);
  ProgressSends(rank, box);
}

std::string HostArena::Unreceived(int rank, int peer) const {
  const PerRank& sender = ranks_[peer];
  const std::uint64_t posted = sender.posted.load(std::memory_order_acquire);
  std::vector<std::string> messages;
  for (std::uint64_t i = sender.reclaimed.load(std::memory_order_acquire);
       i < posted; ++i) {
    PostView v;
    if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
    if (v.to == rank && v.offset == 0 && v.state == Post::kOpen) {
      messages.push_back(Describe(v.count, v.type, v.tag));
    }
  }
  if (messages.empty()) return "";
  return fmt::format("; rank {} has sent this rank {}, which no receive took",
                     peer, fmt::join(messages, ", "));
}

std::uint64_t HostArena::PostSend(int rank, const void* data, std::size_t count,
                                  DataType type, int peer, std::uint32_t tag) {
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  Mailbox& box = MailboxOf(rank);
  Mailbox::Op op;
  op.id = box.next_id++;
  op.send = true;
  op.peer = peer;
  op.message = {count, type, tag};
  op.data = static_cast<unsigned char*>(const_cast<void*>(data));
  op.bytes = count * SizeOf(type);
  op.pieces =
      std::max<std::uint64_t>(1, (op.bytes + kPieceBytes - 1) / kPieceBytes);
  op.number = box.next_number++;
  box.ops.push_back(std::move(op));
  // What fits goes at once: a receiver need not wait for this rank's wait.
  ProgressSends(rank, box);
  return box.ops.back().id;
}

std::uint64_t HostArena::PostRecv(int rank, void* data, std::size_t count,
                                  DataType type, int peer, std::uint32_t tag) {
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  Mailbox& box = MailboxOf(rank);
  Mailbox::Op op;
  op.id = box.next_id++;
  op.peer = peer;
  op.message = {count, type, tag};
  op.data = static_cast<unsigned char*>(data);
  op.bytes = count * SizeOf(type);
  op.pieces =
      std::max<std::uint64_t>(1, (op.bytes + kPieceBytes - 1) / kPieceBytes);
  box.ops.push_back(std::move(op));
  return box.ops.back().id;
}

void HostArena::WaitFor(int rank, std::uint64_t id,
                        std::chrono::milliseconds timeout) {
  const Deadline deadline(timeout);
  Mailbox& box = MailboxOf(rank);
  PerRank& me = ranks_[rank];
  // Ends the wait: the operation is forgotten (its pieces still posted
  // stay there; a send's unposted ones are never posted).
  const auto finish = [&](std::string error, bool give_up) {
    me.waiting_on.store(-1, std::memory_order_relaxed);
    auto op = box.Find(id);
    if (op != box.ops.end()) box.ops.erase(op);
    if (error.empty()) return;
    // What this rank had posted or taken half-way cannot be trusted.
    if (give_up) GiveUp(rank);
    throw CommError(error);
  };
  for (;;) {
    const std::uint32_t bell = me.doorbell.load(std::memory_order_seq_cst);
    Progress(rank);
    auto op = box.Find(id);
    if (op == box.ops.end()) {
      throw CommError(
          fmt::format("no send or receive {} of rank {} in flight", id, rank));
    }
    if (!op->error.empty()) return finish(op->error, false);
    if (op->done()) return finish("", false);
    try {
      ThrowIfUnusable();
    } catch (const CommError& e) {
      finish(e.what(), false);
    }
    const int peer = op->peer;
    const bool send = op->send;
    const char* waiting = send ? "to receive it" : "to send it";
    me.waiting_on.store(peer, std::memory_order_seq_cst);
    // What the peer did before it went counts: once more, then fail.
    const auto gone = [&](const char* how) {
      Progress(rank);
      auto again = box.Find(id);
      if (again != box.ops.end() && again->error.empty() && again->done()) {
        return finish("", false);
      }
      finish(fmt::format("rank {} {} while this rank waited for it {}", peer,
                         how, waiting),
             true);
    };
    if (ranks_[peer].ended.load(std::memory_order_seq_cst) != 0) {
      return gone("ended");
    }
    if (ranks_[peer].left.load(std::memory_order_seq_cst) != 0) {
      return gone("returned from its body");
    }
    const auto left = deadline.at - Clock::now();
    if (left <= Clock::duration::zero()) {
      finish(fmt::format("timed out after {} ms waiting for rank {} {} "
                         "(same-host arena){}",
                         deadline.timeout.count(), peer, waiting,
                         send ? std::string() : Unreceived(rank, peer)),
             true);
    }
    // Checks the deadline and a failed arena now and then without a wake.
    FutexWait(&me.doorbell, bell,
              std::min<long long>(std::chrono::nanoseconds(left).count(),
                                  100'000'000));
    me.waiting_on.store(-1, std::memory_order_relaxed);
  }
}

void HostArena::Send(int rank, const void* data, std::size_t count,
                     DataType type, int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  WaitFor(rank, PostSend(rank, data, count, type, peer, tag), timeout);
}

void HostArena::Recv(int rank, void* data, std::size_t count, DataType type,
                     int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  WaitFor(rank, PostRecv(rank, data, count, type, peer, tag), timeout);
}

}  // namespace disttest
