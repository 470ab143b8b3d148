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
// recv, larger buffers) through Gloo; all ranks take the same path, since
// they call the same collectives with the same counts.
//
// On a 2-core machine a Gloo barrier and allreduce of 8 floats cost about
// 0.6 ms at 4 ranks, nearly all of it hand-offs between each rank's event-loop
// thread and its main thread; here a rank waits on a futex in the arena.
//
// Every result is reduced in rank order on every rank, so all ranks get the
// same bits. A wait ends with CommError when its timeout passes (naming the
// ranks that did not arrive) or when MarkEnded() says a rank has gone.
#ifndef DISTTEST_COMM_HOST_ARENA_H_
#define DISTTEST_COMM_HOST_ARENA_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "disttest/comm/communicator.h"

namespace disttest {

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
  // [1, kMaxRanks] or the memory cannot be mapped.
  static std::shared_ptr<HostArena> Create(int world);
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

  // Whether a collective of `bytes` per rank goes through the arena.
  bool Fits(std::size_t bytes) const {
    return bytes <= kSlotBytes &&
           bytes * static_cast<std::size_t>(world_) <= kMaxTotalBytes;
  }

  // The collectives, called by rank `rank` of world(); each waits at most
  // `timeout`. Throw CommError with the cause (without the "[rank r/N] op
  // failed" prefix, which the communicator adds).
  void Barrier(int rank, std::chrono::milliseconds timeout);
  void AllReduce(int rank, void* data, std::size_t count, DataType type,
                 ReduceOp op, std::chrono::milliseconds timeout);
  void Broadcast(int rank, void* data, std::size_t bytes, int root,
                 std::chrono::milliseconds timeout);
  void AllGather(int rank, const void* in, void* out, std::size_t bytes,
                 std::chrono::milliseconds timeout);

 private:
  struct Header;
  HostArena(int world, int fd, void* memory, std::size_t size, bool fresh);
  static std::size_t SizeFor(int world);
  unsigned char* Slot(int rank, unsigned parity);
  // The rank's next slot parity: collectives alternate between two slots,
  // so that writing one never races with a slow peer still reading the last.
  unsigned NextParity(int rank);

  int world_;
  int fd_;
  void* memory_;
  std::size_t size_;
  Header* header_;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_HOST_ARENA_H_
