// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// HostArena: shared memory in which the ranks of one host run small
// collectives (barrier, and allreduce, broadcast and allgather of up to
// kSlotBytes per rank, kMaxTotalBytes for all ranks) without a round trip
// through sockets.
//
//   auto arena = disttest::HostArena::Create(world);  // before fork()
//   ... fork the ranks ...
//   // in rank r:
//   disttest::GlooOptions gloo;
//   gloo.arena = arena;
//   auto comm = disttest::GlooCommunicator::Create(store, r, world, gloo);
//   // in the parent, when a rank has ended:
//   arena->MarkEnded(r);   // its peers' waits fail at once, naming it
//
// The memory is a memfd ("disttest-arena", close-on-exec) mapped shared:
// processes forked after Create() share the mapping; a process started with
// exec() gets it through the descriptor (fd(), cleared of close-on-exec in
// that child) and Attach(). Nothing is left on any file system, and the
// memory goes with the last mapping. A Gloo communicator given an
// arena routes those collectives through it and everything else (send and
// recv, larger buffers) through Gloo, after Check() (below).
//
// On a 2-core machine a Gloo barrier and allreduce of 8 floats cost about
// 0.6 ms at 4 ranks, nearly all of it hand-offs between each rank's event-loop
// thread and its main thread; here a rank waits on a futex in the arena.
//
// Every result is reduced in rank order on every rank, so all ranks get the
// same bits. A wait ends with CommError when its timeout passes (naming the
// ranks that did not arrive) or when MarkEnded() says a rank has gone.
//
// Every collective is checked before any rank uses a peer's data: each rank
// writes its CollectiveCall (collective_call.h) and sequence number beside
// its slot, and after the barrier compares every rank's with its own. Ranks
// that disagree (rank 0 in allreduce while rank 1 broadcasts; 8 floats
// against 16; sum against max; two roots) all fail at once with the same
// message, naming what each rank called:
//   collective #3 does not match across the 2 ranks: rank 0:
//   allreduce(8 x float32, sum); rank 1: broadcast(8 x float32, root 0)
// Collectives whose data goes elsewhere (too large for the slots, or an
// arena created without data, as under DISTTEST_NO_HOST_ARENA=1) call
// Check() first: the same comparison, no data. After a mismatch every later
// collective in the arena fails, naming it.
#ifndef DISTTEST_SRC_COMM_HOST_ARENA_H_
#define DISTTEST_SRC_COMM_HOST_ARENA_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "disttest/comm/collective_call.h"
#include "disttest/comm/communicator.h"

namespace disttest {
namespace internal {
struct HostArenaBenchmark;  // bench/collective_check_cost.cc
}  // namespace internal

class HostArena {
 public:
  // Bytes each rank may contribute to one collective through the arena.
  static constexpr std::size_t kSlotBytes = 64 * 1024;
  // Bytes of all ranks together that one collective may read: each rank
  // reduces or copies every rank's slot, so larger worlds take smaller
  // buffers through the arena.
  static constexpr std::size_t kMaxTotalBytes = 512 * 1024;
  static constexpr int kMaxRanks = 1024;

  // Maps the arena for `world` ranks; throws Error if world is out of
  // [1, kMaxRanks] or the memory cannot be mapped. Without `carry_data` it
  // has no slots: it only checks (Check(), Barrier()) and Fits() is false.
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

  // Whether collectives carry data through the arena (Create's carry_data).
  bool carries_data() const { return carry_data_; }

  // Whether a collective of `bytes` per rank goes through the arena.
  bool Fits(std::size_t bytes) const {
    return carry_data_ && bytes <= kSlotBytes &&
           bytes * static_cast<std::size_t>(world_) <= kMaxTotalBytes;
  }

  // The collectives, called by rank `rank` of world(); each waits at most
  // `timeout` and checks that every rank made the same call. Throw CommError
  // with the cause (without the "[rank r/N] op failed" prefix, which the
  // communicator adds).
  void Barrier(int rank, std::chrono::milliseconds timeout);
  // Waits for every rank as Barrier() does and checks that each made this
  // call, for a collective whose data then goes through another transport.
  void Check(int rank, const CollectiveCall& call,
             std::chrono::milliseconds timeout);
  void AllReduce(int rank, void* data, std::size_t count, DataType type,
                 ReduceOp op, std::chrono::milliseconds timeout);
  void Broadcast(int rank, void* data, std::size_t count, DataType type,
                 int root, std::chrono::milliseconds timeout);
  void AllGather(int rank, const void* in, void* out, std::size_t count,
                 DataType type, std::chrono::milliseconds timeout);

 private:
  // Turns the comparison of calls off, to measure what it costs; nothing
  // else can.
  friend struct internal::HostArenaBenchmark;
  struct Header;
  static const std::size_t kHeaderBytes;
  HostArena(int world, int fd, void* memory, std::size_t size, bool fresh,
            bool carry_data);
  static std::size_t SizeFor(int world, bool carry_data);
  unsigned char* Slot(int rank, unsigned parity);
  // The rank's next collective: its sequence number, whose parity names the
  // slots it uses (collectives alternate between two, so that writing one
  // never races with a slow peer still reading the last).
  std::uint64_t NextSequence(int rank);
  // Publishes rank's `call` as collective `seq`, waits for every rank, then
  // compares their calls; throws CommError naming each rank's call if they
  // differ.
  void Meet(int rank, const CollectiveCall& call, std::uint64_t seq,
            std::chrono::milliseconds timeout);
  // The barrier alone: waits for every rank (no check).
  void Wait(int rank, std::chrono::milliseconds timeout);
  [[noreturn]] void Mismatch(std::uint64_t seq, unsigned parity);

  int world_;
  bool carry_data_;
  bool check_calls_ = true;
  int fd_;
  void* memory_;
  std::size_t size_;
  Header* header_;
};

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_HOST_ARENA_H_
