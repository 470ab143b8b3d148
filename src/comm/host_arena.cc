// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The arena's memory (host_arena_layout.h): its size, mapping it, and what
// says a rank has ended or the arena cannot be used any more, which the
// collectives, the mailbox and the pool dispatch all heed.
#include "comm/host_arena.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>
#include <memory>
#include <new>

#include "comm/host_arena_layout.h"
#include "comm/host_arena_mailbox.h"
#include "comm/peer_errors.h"
#include "comm/shared_memory.h"
#include "disttest/error.h"

namespace disttest {
namespace internal {

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

}  // namespace internal

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
  in_flight_ =
      std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(world));
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
  internal::FutexWakeAll(&h.generation);
  // Only the ranks that wait for it in a send or receive: at the end of a
  // test, when every rank ends, none does and this costs no system call.
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].waiting_on.load(std::memory_order_seq_cst) == rank) Ring(q);
  }
}

int HostArena::FirstEnded() const {
  return header_->ended.load(std::memory_order_acquire) - 1;
}

bool HostArena::Ended(int rank) const {
  return ranks_[rank].ended.load(std::memory_order_acquire) != 0;
}

bool HostArena::Passed(int rank) const {
  return ranks_[rank].left.load(std::memory_order_acquire) == 2;
}

void HostArena::MarkLeft(int rank, bool passed) {
  ranks_[rank].left.store(passed ? 2 : 1, std::memory_order_seq_cst);
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].waiting_on.load(std::memory_order_seq_cst) == rank) Ring(q);
  }
}

void HostArena::Ring(int rank) {
  PerRank& r = ranks_[rank];
  r.doorbell.fetch_add(1, std::memory_order_seq_cst);
  // A rank not (yet) waiting reads what changed before it sleeps on the
  // doorbell; one already asleep published waiting_on first.
  if (r.waiting_on.load(std::memory_order_seq_cst) >= 0) {
    internal::FutexWakeAll(&r.doorbell);
  }
}

void HostArena::ThrowIfUnusable() {
  Header& h = *header_;
  if (std::uint64_t bad = h.mismatch.load(std::memory_order_acquire)) {
    throw internal::ErrorOfAPeer(fmt::format(
        "collective #{} {}; the host arena cannot be used after that", bad - 1,
        internal::kPeerSawMismatch));
  }
  if (std::int32_t failed = h.failed.load(std::memory_order_acquire)) {
    // A peer that ended is why the first waiter gave up: name it, as that
    // waiter did, rather than the waiter.
    if (std::int32_t ended = h.ended.load(std::memory_order_acquire)) {
      throw internal::ErrorOfAPeer(
          fmt::format("rank {} {}", ended - 1, internal::kPeerEnded));
    }
    throw internal::ErrorOfAPeer(
        fmt::format("rank {} {}; the arena cannot be used after that",
                    failed - 1, internal::kPeerGaveUp));
  }
}

void HostArena::GiveUp(int rank) {
  Header& h = *header_;
  std::int32_t none = 0;
  h.failed.compare_exchange_strong(none, rank + 1, std::memory_order_acq_rel);
  internal::FutexWakeAll(&h.generation);
}

}  // namespace disttest
