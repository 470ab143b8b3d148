// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// HostArena: shared memory (a memfd) in which the ranks of one host run their
// collectives and their sends and receives, without a socket between them.
// The parent Create()s it before it forks the ranks and MarkEnded()s a rank
// that ended; a rank gives it to its communicator (GlooOptions::arena), after
// exec through Attach(fd()). The protocol: docs/how-it-works.md#the-host-arena;
// the check of every collective:
// docs/how-it-works.md#the-check-of-every-collective.
#ifndef DISTTEST_SRC_COMM_HOST_ARENA_H_
#define DISTTEST_SRC_COMM_HOST_ARENA_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/comm/collective_call.h"
#include "disttest/comm/communicator.h"

namespace disttest {
namespace internal {
struct HostArenaBenchmark;  // bench/collective_check_cost.cc

}  // namespace internal

class HostArena {
 public:
  // Bytes each rank puts into one round of a collective, and one piece of a
  // send.
  static constexpr std::size_t kSlotBytes = 64 * 1024;
  // A round of up to this many bytes per rank goes beside the call, in the
  // header, where a peer reads it with the call.
  static constexpr std::size_t kSmallBytes = 512;
  // An allreduce of up to this many bytes for all ranks together (world
  // times the buffer) is reduced whole by every rank, in one round: for small
  // buffers one barrier is the cost. A larger one is split: each rank reduces
  // its 1/world share of the round from every slot, then all copy the
  // shares, two barriers a round and each byte reduced once.
  static constexpr std::size_t kWholeReduceBytes = 64 * 1024;
  static constexpr int kMaxRanks = 1024;

  // Maps the arena for `world` ranks; throws Error if world is out of
  // [1, kMaxRanks] or the memory cannot be mapped. Without `carry_data` it
  // has no slots: it only checks (Check(), Barrier()), and collectives'
  // data go elsewhere.
  static std::shared_ptr<HostArena> Create(int world, bool carry_data = true);
  // Maps the arena behind `fd` (an fd() inherited across exec) for `world`
  // ranks, and closes fd; throws Error naming the descriptor if it is not
  // such an arena.
  static std::shared_ptr<HostArena> Attach(int fd, int world);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  int world() const { return world_; }
  // The memfd behind the arena (-1 once attached, or where memfd_create is
  // not allowed: then only forked processes can share it).
  int fd() const { return fd_; }

  // Says that `rank` has ended: every wait in the arena, now or later, fails
  // with a message naming it. Safe to call from a process that takes no part
  // (the harness's parent) and from a signal handler.
  void MarkEnded(int rank);
  // Says that `rank` has returned from its body and makes no more sends or
  // receives: a peer that waits for it in one fails at once, naming it.
  // `passed`: its test did not fail there (it passed, or skipped).
  void MarkLeft(int rank, bool passed = false);
  // For a transport that waits outside the arena (NCCL), to stop waiting
  // for a rank that will not come: the first rank MarkEnded() named, or -1
  // while none has ended; whether `rank` has ended.
  int FirstEnded() const;
  bool Ended(int rank) const;
  // Whether `rank` returned from its body without a failure (MarkLeft): it
  // finished every call it made.
  bool Passed(int rank) const;

  // Whether collectives carry data through the arena (Create's carry_data).
  bool carries_data() const { return carry_data_; }

  // The collectives, called by rank `rank` of world(); each waits at most
  // `timeout` and checks that every rank made the same call. Throw CommError
  // with the cause (without the "[rank r/N] op failed" prefix, which the
  // communicator adds).
  void Barrier(int rank, std::chrono::milliseconds timeout);
  // Waits for every rank as Barrier() does and checks that each made this
  // call, for a collective whose data then goes through another transport.
  void Check(int rank, const CollectiveCall& call,
             std::chrono::milliseconds timeout);
  //
  // `as`, where given, is the call the ranks compare instead of this one's
  // own: a collective made of this one (a reduce is an allreduce of which
  // only the root keeps the result) is checked as itself, so a reduce
  // never meets an allreduce. Its fields must decide this call's.
  void AllReduce(int rank, void* data, std::size_t count, DataType type,
                 ReduceOp op, std::chrono::milliseconds timeout,
                 const CollectiveCall* as = nullptr);
  void Broadcast(int rank, void* data, std::size_t count, DataType type,
                 int root, std::chrono::milliseconds timeout,
                 const CollectiveCall* as = nullptr);
  void AllGather(int rank, const void* in, void* out, std::size_t count,
                 DataType type, std::chrono::milliseconds timeout,
                 const CollectiveCall* as = nullptr);
  // A message from `rank` to `peer`, matched by tag; Send returns once
  // `peer` has received all of it. Both throw CommError when the other side
  // expects another count or type, naming both.
  void Send(int rank, const void* data, std::size_t count, DataType type,
            int peer, std::uint32_t tag, std::chrono::milliseconds timeout);
  void Recv(int rank, void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag, std::chrono::milliseconds timeout);
  // The same without waiting: the id of the operation, for WaitFor(). Every
  // wait of the rank moves all of its operations on. The buffer must stay
  // valid until the operation has completed.
  std::uint64_t PostSend(int rank, const void* data, std::size_t count,
                         DataType type, int peer, std::uint32_t tag);
  std::uint64_t PostRecv(int rank, void* data, std::size_t count, DataType type,
                         int peer, std::uint32_t tag);
  // Waits until operation `id` of `rank` has completed, at most `timeout`;
  // throws CommError when it fails (as Send and Recv do). Then the id is
  // forgotten.
  void WaitFor(int rank, std::uint64_t id, std::chrono::milliseconds timeout);
  // Forgets operation `id` of `rank` if it is still there (never waited
  // for): nothing moves it on from now on. Its posted pieces stay posted.
  void Forget(int rank, std::uint64_t id) noexcept;

  // The bytes of a rank's messages that can be on their way at once (the
  // rest of a message is posted as its receiver takes what came before),
  // and the size of the pieces a message travels in.
  static constexpr std::size_t kHeapBytes = 1024 * 1024;
  static constexpr std::size_t kPieceBytes = 64 * 1024;
  // Pieces a rank's mailbox holds at once: an isend to each of 255 peers,
  // received in any order (MPI pairs envelopes without bound; here a
  // message waits for room behind those not yet received).
  static constexpr std::size_t kPosts = 256;

  // Pooled ranks (options().reuse_workers) get their tests through the
  // arena: a rank parks for test n (1, 2, ...) and sleeps on a futex; the
  // parent sees every rank parked, writes the name and wakes them all.
  //
  //   arena.Park(rank, n);                 // rank, before its verdict
  //   if (arena.AllParked(n)) arena.Dispatch(n, name);   // parent
  //   std::optional<std::string> next = arena.AwaitTest(n);  // rank
  //
  // The longest name the arena carries; a longer one goes through the
  // store (AwaitTest returns nullopt).
  static constexpr std::size_t kTestNameBytes = 1024;
  // Rank: says that it waits for test `n` from now on.
  void Park(int rank, std::uint32_t n);
  // Parent: whether every rank has parked for test `n`.
  bool AllParked(std::uint32_t n) const;
  // Parent: hands out test `n`, `name` (empty: leave). A name longer than
  // kTestNameBytes is not written: the parent puts it in the store first.
  void Dispatch(std::uint32_t n, const std::string& name);
  // Rank: waits, without a deadline (a parent that dies takes the rank with
  // it), for test `n`; its name, or nullopt when it is in the store.
  std::optional<std::string> AwaitTest(std::uint32_t n);

 private:
  // Turns the comparison of calls off, to measure what it costs; nothing
  // else can.
  friend struct internal::HostArenaBenchmark;
  struct Header;
  struct PerRank;
  struct Post;
  struct Mailbox;  // A rank's operations in flight, in this process.
  using Clock = std::chrono::steady_clock;
  // When an operation (all its rounds) gives up, and its timeout, for the
  // message.
  struct Deadline {
    explicit Deadline(std::chrono::milliseconds t)
        : at(Clock::now() + t), timeout(t) {}
    Clock::time_point at;
    std::chrono::milliseconds timeout;
  };
  // Where the PerRank array starts, and the bytes before the data slots.
  static std::size_t RanksOffset();
  static std::size_t HeaderBytes(int world);
  HostArena(int world, int fd, void* memory, std::size_t size, bool fresh,
            bool carry_data);
  static std::size_t SizeFor(int world, bool carry_data);
  // Where `rank` puts its data for a round of `bytes` (per rank).
  unsigned char* Slot(int rank, unsigned parity, std::size_t bytes);
  unsigned char* Heap(int rank);
  Mailbox& MailboxOf(int rank);
  // Moves `rank`'s operations on, without waiting: posts what room allows,
  // takes what came, settles what peers took or refused.
  void Progress(int rank);
  // The same from a collective's wait, where `rank` has operations in
  // flight (a peer's send may wait for a receive this rank posted before
  // the collective, as MPI's progress rule has it); nothing otherwise.
  // Whether one of them is still to complete.
  bool ProgressWhileInACollective(int rank);
  void ProgressSends(int rank, Mailbox& box);
  void ProgressRecvs(int rank, Mailbox& box);
  // For a timeout: what `peer` posted to `rank` that no receive took.
  std::string Unreceived(int rank, int peer) const;
  // The rank's next collective: its sequence number, which ranks compare.
  std::uint64_t NextSequence(int rank);
  // The rank's next round (a collective takes one or more): its parity
  // names the slots and the entry it uses (rounds alternate between two, so
  // that writing one never races with a slow peer still reading the last).
  unsigned NextRound(int rank);
  // Publishes rank's `call` as collective `seq` for a round of `parity`,
  // waits for every rank, then compares their calls; throws CommError
  // naming each rank's call if they differ.
  void Meet(int rank, const CollectiveCall& call, std::uint64_t seq,
            unsigned parity, const Deadline& deadline);
  // The barrier alone: waits for every rank (no check). In a Meet of a
  // round of `parity`, a timeout also says what each missing rank did last
  // (its entry of the round before, which it no longer writes).
  void Wait(int rank, const Deadline& deadline, int parity = -1);
  // "rank 3's last collective was #16 broadcast(16 x int32, root 0)",
  // "rank 3 has entered no collective": the `missing` ranks' entries of the
  // round of `parity`, grouped.
  std::string LastCalls(const std::vector<int>& missing, unsigned parity) const;
  [[noreturn]] void Mismatch(int rank, std::uint64_t seq, unsigned parity);
  // Throws if the arena cannot be used: a collective did not match, or a
  // rank gave up a wait.
  void ThrowIfUnusable();
  // Marks the arena unusable (`rank` gave up a wait) and wakes every wait.
  void GiveUp(int rank);
  // Wakes `rank` if it waits in a send or receive.
  void Ring(int rank);
  // Waits until ready() while `rank` waits for `peer` in a send or receive;
  // throws CommError (giving the arena up) at the deadline or when `peer`
  // has ended, `waiting` saying what for: "to send it", "to receive it".

  int world_;
  bool carry_data_;
  bool check_calls_ = true;
  int fd_;
  void* memory_;
  std::size_t size_;
  Header* header_;
  PerRank* ranks_;  // world_ of them, after the header.
  // Per rank: made on its first send or receive (in a process of one rank,
  // one of them; ranks that are threads of one process, one each).
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::mutex mailboxes_made_;  // Made on first use, by any thread.
  // Per rank: its sends and receives posted and not yet waited for, which a
  // collective's wait moves on (a peer's send waits for its posted receive).
  std::unique_ptr<std::atomic<int>[]> in_flight_;
};

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_HOST_ARENA_H_
