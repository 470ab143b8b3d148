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
// A send goes through the sender's outbox, one slot-sized piece at a time:
// the sender writes the piece and the message's description, then offers it
// (`offer`: the piece's serial number and its receiver, in one word); the
// receiver copies it out and sets `taken` to that serial; the sender waits
// for that before it writes the next. Only the receiver an offer names reads
// the outbox while it stands, so one word is all the two need. A rank that
// waits in a send or receive sleeps on its own `doorbell`, which whoever
// changes what it waits for rings; `waiting_on` says for whom, so that
// MarkEnded() wakes exactly those that wait for the rank that ended.
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

  // Its outbox. `offer` is serial << 12 | (receiver + 1), 0 when none yet;
  // serials count up from 1 and are written by this rank only.
  std::atomic<std::uint64_t> offer{0};
  std::atomic<std::uint64_t> taken{0};
  std::uint64_t serial = 0;
  // The message whose piece is offered (the sender's; read by the
  // receiver only while the offer stands).
  Header::Message sending;
  // A receiver that refuses a piece (another tag, count or type) sets
  // `refused` to its serial, with what it expected, before `taken`.
  std::atomic<std::uint64_t> refused{0};
  Header::Message expected;
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

constexpr int kReceiverBits = 12;
static_assert(HostArena::kMaxRanks < (1 << kReceiverBits));
constexpr std::uint64_t kReceiverMask = (1u << kReceiverBits) - 1;

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
  // Two slots for collectives and an outbox per rank.
  return HeaderBytes(world) +
         (carry_data ? static_cast<std::size_t>(world) * 3 * kSlotBytes : 0);
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

unsigned char* HostArena::Outbox(int rank) {
  return static_cast<unsigned char*>(memory_) + HeaderBytes(world_) +
         (static_cast<std::size_t>(world_) * 2 + rank) * kSlotBytes;
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

template <typename Ready>
void HostArena::AwaitPeer(int rank, int peer, const Deadline& deadline,
                          const char* waiting, Ready&& ready) {
  PerRank& me = ranks_[rank];
  for (;;) {
    const std::uint32_t bell = me.doorbell.load(std::memory_order_seq_cst);
    if (ready()) return;
    ThrowIfUnusable();
    me.waiting_on.store(peer, std::memory_order_seq_cst);
    const auto stop = [&](const std::string& why) {
      me.waiting_on.store(-1, std::memory_order_relaxed);
      // What this rank had offered or taken half-way cannot be trusted.
      GiveUp(rank);
      throw CommError(why);
    };
    // What the peer did before it went counts: ready() once more.
    if (ranks_[peer].ended.load(std::memory_order_seq_cst) != 0) {
      if (ready()) break;
      stop(fmt::format("rank {} ended while this rank waited for it {}", peer,
                       waiting));
    }
    if (ranks_[peer].left.load(std::memory_order_seq_cst) != 0) {
      if (ready()) break;
      stop(
          fmt::format("rank {} returned from its body while this rank "
                      "waited for it {}",
                      peer, waiting));
    }
    const auto left = deadline.at - Clock::now();
    if (left <= Clock::duration::zero()) {
      stop(
          fmt::format("timed out after {} ms waiting for rank {} {} "
                      "(same-host arena)",
                      deadline.timeout.count(), peer, waiting));
    }
    // Checks the deadline and a failed arena now and then without a wake.
    FutexWait(&me.doorbell, bell,
              std::min<long long>(std::chrono::nanoseconds(left).count(),
                                  100'000'000));
    me.waiting_on.store(-1, std::memory_order_relaxed);
  }
  me.waiting_on.store(-1, std::memory_order_relaxed);
}

void HostArena::Send(int rank, const void* data, std::size_t count,
                     DataType type, int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  const Deadline deadline(timeout);
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  PerRank& me = ranks_[rank];
  const Header::Message message{count, type, tag};
  const std::size_t bytes = count * SizeOf(type);
  const auto* from = static_cast<const unsigned char*>(data);
  // Every piece offered before was taken (each send waited for that): the
  // outbox is this rank's to write. At least one piece, for an empty message.
  std::size_t done = 0;
  do {
    const std::size_t n = std::min(kSlotBytes, bytes - done);
    if (n > 0) std::memcpy(Outbox(rank), from + done, n);
    me.sending = message;
    const std::uint64_t serial = ++me.serial;
    me.offer.store(
        serial << kReceiverBits | static_cast<std::uint64_t>(peer + 1),
        std::memory_order_release);
    Ring(peer);
    AwaitPeer(rank, peer, deadline, "to receive it", [&] {
      return me.taken.load(std::memory_order_acquire) == serial;
    });
    if (me.refused.load(std::memory_order_acquire) == serial) {
      const Header::Message& want = me.expected;
      throw CommError(fmt::format("rank {} sent {}; rank {} expected {}", rank,
                                  Describe(count, type, tag), peer,
                                  Describe(want.count, want.type, want.tag)));
    }
    done += n;
  } while (done < bytes);
}

void HostArena::Recv(int rank, void* data, std::size_t count, DataType type,
                     int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  const Deadline deadline(timeout);
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  PerRank& sender = ranks_[peer];
  const Header::Message expected{count, type, tag};
  const std::size_t bytes = count * SizeOf(type);
  auto* to = static_cast<unsigned char*>(data);
  std::size_t done = 0;
  do {
    std::uint64_t offer = 0;
    AwaitPeer(rank, peer, deadline, "to send it", [&] {
      // An offer naming this rank that it has not taken yet: the sender
      // touches neither the outbox nor its description until it is taken.
      offer = sender.offer.load(std::memory_order_acquire);
      return (offer & kReceiverMask) == static_cast<std::uint64_t>(rank + 1) &&
             (offer >> kReceiverBits) >
                 sender.taken.load(std::memory_order_acquire);
    });
    const std::uint64_t serial = offer >> kReceiverBits;
    const Header::Message sent = sender.sending;
    if (!(sent == expected)) {
      // The message's first piece (later ones have the same description):
      // refuse it, so that the sender fails at once too.
      sender.expected = expected;
      sender.refused.store(serial, std::memory_order_relaxed);
      sender.taken.store(serial, std::memory_order_release);
      Ring(peer);
      throw CommError(fmt::format("rank {} sent {}; rank {} expected {}", peer,
                                  Describe(sent.count, sent.type, sent.tag),
                                  rank, Describe(count, type, tag)));
    }
    const std::size_t n = std::min(kSlotBytes, bytes - done);
    if (n > 0) std::memcpy(to + done, Outbox(peer), n);
    sender.taken.store(serial, std::memory_order_release);
    Ring(peer);
    done += n;
  } while (done < bytes);
}

}  // namespace disttest
