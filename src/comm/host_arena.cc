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
#include <string>
#include <vector>

#include "comm/visit_type.h"
#include "disttest/error.h"
#include "env/text.h"

namespace disttest {

// The barrier is a counter and a generation number: the last rank to arrive
// resets the counter and bumps the generation, on which the others wait
// (a futex: the memory is shared between processes). `ended` holds 1 + the
// first rank said to have ended.
struct HostArena::Header {
  // What a rank called as its collective `seq`.
  struct Entry {
    CollectiveCall call;
    std::uint64_t seq = 0;
  };
  struct alignas(64) PerRank {
    // Barriers this rank has entered: who is missing, on a timeout.
    std::atomic<std::uint64_t> arrivals{0};
    // Collectives this rank has entered: the next one's sequence number.
    // Written only by the rank itself.
    std::uint64_t ops = 0;
    // Its last two calls, by the parity of their sequence numbers: a fast
    // rank writes the next while a slow one may still read the last.
    Entry entries[2];
  };
  alignas(64) std::atomic<std::uint32_t> arrived{0};
  alignas(64) std::atomic<std::uint32_t> generation{0};
  alignas(64) std::atomic<std::int32_t> ended{0};
  // 1 + the first rank whose wait failed. Its arrival is still counted in
  // a barrier that never completed, so the arena cannot be used again.
  std::atomic<std::int32_t> failed{0};
  // 1 + the sequence number of the first collective that did not match.
  std::atomic<std::uint64_t> mismatch{0};
  PerRank ranks[kMaxRanks];
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free,
              "the arena's atomics must work across processes");

namespace {

// Waits while *word == expected, at most `ns`; shared (not private) futex.
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               long long ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000),
              static_cast<long>(ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT,
          expected, &ts, nullptr, 0);
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
  internal::VisitType(type, [&]<typename T>(T*) {
    Reduce(static_cast<T*>(out), static_cast<const T*>(in), n, op);
  });
}

}  // namespace

// The header, rounded up to a page.
constexpr std::size_t HostArena::kHeaderBytes =
    (sizeof(HostArena::Header) + 4095) / 4096 * 4096;

std::size_t HostArena::SizeFor(int world, bool carry_data) {
  return kHeaderBytes +
         (carry_data ? static_cast<std::size_t>(world) * 2 * kSlotBytes : 0);
}

std::shared_ptr<HostArena> HostArena::Create(int world, bool carry_data) {
  if (world < 1 || world > kMaxRanks) {
    throw Error(fmt::format("a host arena takes 1 to {} ranks, not {}",
                            kMaxRanks, world));
  }
  const std::size_t size = SizeFor(world, carry_data);
  int fd = memfd_create("disttest-arena", MFD_CLOEXEC);
  if (fd >= 0 && fd <= STDERR_FILENO) {
    // A process started without stdin: a rank's stdio would replace it.
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(fd);
    fd = moved;
  }
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    fd = -1;
  }
  // Without a memfd, anonymous shared memory still serves forked ranks.
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, fd, 0);
  if (memory == MAP_FAILED) {
    const int error = errno;
    if (fd >= 0) close(fd);
    throw Error(fmt::format("cannot map a host arena of {} bytes: {}", size,
                            std::strerror(error)));
  }
  return std::shared_ptr<HostArena>(
      new HostArena(world, fd, memory, size, /*fresh=*/true, carry_data));
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
  void* memory =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (memory == MAP_FAILED) {
    throw Error(fmt::format("cannot map the host arena (descriptor {}): {}", fd,
                            std::strerror(error)));
  }
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
  static_assert(sizeof(Header) <= kHeaderBytes);
}

HostArena::~HostArena() {
  munmap(memory_, size_);
  if (fd_ >= 0) close(fd_);
}

void HostArena::MarkEnded(int rank) {
  std::int32_t none = 0;
  header_->ended.compare_exchange_strong(none, rank + 1,
                                         std::memory_order_acq_rel);
  FutexWakeAll(&header_->generation);
}

unsigned char* HostArena::Slot(int rank, unsigned parity) {
  return static_cast<unsigned char*>(memory_) + kHeaderBytes +
         (static_cast<std::size_t>(rank) * 2 + parity) * kSlotBytes;
}

std::uint64_t HostArena::NextSequence(int rank) {
  return header_->ranks[rank].ops++;
}

void HostArena::Barrier(int rank, std::chrono::milliseconds timeout) {
  Meet(rank, CollectiveCall::Barrier(), NextSequence(rank), timeout);
}

void HostArena::Check(int rank, const CollectiveCall& call,
                      std::chrono::milliseconds timeout) {
  Meet(rank, call, NextSequence(rank), timeout);
}

void HostArena::Meet(int rank, const CollectiveCall& call, std::uint64_t seq,
                     std::chrono::milliseconds timeout) {
  Header& h = *header_;
  if (std::uint64_t bad = h.mismatch.load(std::memory_order_acquire)) {
    throw CommError(fmt::format(
        "collective #{} did not match across the ranks (see that error); the "
        "host arena cannot be used after that",
        bad - 1));
  }
  const unsigned parity = static_cast<unsigned>(seq & 1u);
  if (!check_calls_) return Wait(rank, timeout);
  h.ranks[rank].entries[parity] = {call, seq};
  // The barrier's release and acquire order the entries (and the data slots)
  // before every peer's reads.
  Wait(rank, timeout);
  for (int q = 0; q < world_; ++q) {
    const Header::Entry& theirs = h.ranks[q].entries[parity];
    if (theirs.seq != seq || !(theirs.call == call)) Mismatch(seq, parity);
  }
}

void HostArena::Mismatch(std::uint64_t seq, unsigned parity) {
  Header& h = *header_;
  std::uint64_t none = 0;
  h.mismatch.compare_exchange_strong(none, seq + 1, std::memory_order_acq_rel);
  // Ranks grouped by what they called, in order of their first rank.
  std::vector<std::pair<Header::Entry, std::vector<int>>> groups;
  for (int q = 0; q < world_; ++q) {
    const Header::Entry& entry = h.ranks[q].entries[parity];
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.first.seq == entry.seq && g.first.call == entry.call;
    });
    if (same == groups.end()) {
      groups.push_back({entry, {q}});
    } else {
      same->second.push_back(q);
    }
  }
  std::string calls;
  for (const auto& [entry, ranks] : groups) {
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

void HostArena::Wait(int rank, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  Header& h = *header_;
  const auto unusable = [&] {
    if (std::int32_t failed = h.failed.load(std::memory_order_acquire)) {
      throw CommError(fmt::format(
          "rank {} gave up a collective in the host arena (see its error); "
          "the arena cannot be used after that",
          failed - 1));
    }
  };
  unusable();
  const std::uint32_t generation = h.generation.load(std::memory_order_acquire);
  const std::uint64_t mine =
      h.ranks[rank].arrivals.fetch_add(1, std::memory_order_relaxed) + 1;
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
    std::int32_t none = 0;
    h.failed.compare_exchange_strong(none, rank + 1, std::memory_order_acq_rel);
    FutexWakeAll(&h.generation);
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    throw CommError(why);
  };
  for (;;) {
    if (h.generation.load(std::memory_order_acquire) != generation) return;
    if (std::int32_t ended = h.ended.load(std::memory_order_acquire)) {
      return give_up(fmt::format(
          "rank {} ended while its peers waited for it in a collective",
          ended - 1));
    }
    unusable();
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      std::vector<int> missing;
      for (int q = 0; q < world_; ++q) {
        if (h.ranks[q].arrivals.load(std::memory_order_relaxed) < mine) {
          missing.push_back(q);
        }
      }
      return give_up(fmt::format(
          "timed out after {} ms waiting for rank{} {} (same-host arena)",
          timeout.count(), missing.size() == 1 ? "" : "s",
          fmt::join(missing, ", ")));
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
                          std::chrono::milliseconds timeout) {
  const std::size_t bytes = count * SizeOf(type);
  const std::uint64_t seq = NextSequence(rank);
  const unsigned parity = static_cast<unsigned>(seq & 1u);
  // An empty buffer may be null: no memcpy from it.
  if (bytes > 0) std::memcpy(Slot(rank, parity), data, bytes);
  Meet(rank, CollectiveCall::AllReduce(count, type, op), seq, timeout);
  if (bytes == 0) return;
  // Every rank reduces in rank order: all of them get the same bits.
  std::memcpy(data, Slot(0, parity), bytes);
  for (int q = 1; q < world_; ++q) {
    ReduceAs(type, data, Slot(q, parity), count, op);
  }
}

void HostArena::Broadcast(int rank, void* data, std::size_t count,
                          DataType type, int root,
                          std::chrono::milliseconds timeout) {
  const std::size_t bytes = count * SizeOf(type);
  const std::uint64_t seq = NextSequence(rank);
  const unsigned parity = static_cast<unsigned>(seq & 1u);
  if (rank == root && bytes > 0) std::memcpy(Slot(root, parity), data, bytes);
  Meet(rank, CollectiveCall::Broadcast(count, type, root), seq, timeout);
  if (rank != root && bytes > 0) std::memcpy(data, Slot(root, parity), bytes);
}

void HostArena::AllGather(int rank, const void* in, void* out,
                          std::size_t count, DataType type,
                          std::chrono::milliseconds timeout) {
  const std::size_t bytes = count * SizeOf(type);
  const std::uint64_t seq = NextSequence(rank);
  const unsigned parity = static_cast<unsigned>(seq & 1u);
  if (bytes > 0) std::memcpy(Slot(rank, parity), in, bytes);
  Meet(rank, CollectiveCall::AllGather(count, type), seq, timeout);
  if (bytes == 0) return;
  for (int q = 0; q < world_; ++q) {
    std::memcpy(static_cast<unsigned char*>(out) + q * bytes, Slot(q, parity),
                bytes);
  }
}

}  // namespace disttest
