// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's state (disttest/comm/nccl_communicator.h): the NCCL
// communicator, its stream and scratch buffer, the deadline of the running
// operation and why it broke. nccl_communicator.cc (creation, split, end),
// nccl_waits.cc (starting, polling and breaking an operation),
// nccl_types.cc, nccl_collectives.cc, nccl_exchanges.cc and
// nccl_point_to_point.cc (the operations) define it.
#ifndef DISTTEST_SRC_COMM_NCCL_COMMUNICATOR_IMPL_H_
#define DISTTEST_SRC_COMM_NCCL_COMMUNICATOR_IMPL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttest/comm/collective_call.h"
#include "disttest/comm/nccl_communicator.h"

namespace disttest {

class NcclCommunicator::Impl {
 public:
  Impl(int rank, int size, const NcclOptions& options);
  // A clean end finalises and destroys the NCCL communicator (bounded by
  // the timeout; past it, aborts); a broken or aborted one is left as it
  // is. Never throws.
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Init(Store& store);
  // Makes the stream and event, for a communicator NCCL has made already
  // (split); Init() does this itself.
  void InitStream(const std::string& what);
  bool failed() const;
  void Synchronize();
  void Abort();
  void barrier();
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op);
  void broadcast(void* data, std::size_t count, DataType type, int root);
  void allgather(const void* in, void* out, std::size_t count, DataType type);
  void send(const void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag);
  void recv(void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag);
  void allreduce(const void* in, void* out, std::size_t count, DataType type,
                 ReduceOp op);
  void broadcast(const void* in, void* out, std::size_t count, DataType type,
                 int root);
  void reduce(const void* in, void* out, std::size_t count, DataType type,
              ReduceOp op, int root);
  void reduce_scatter(const void* in, void* out, std::size_t count,
                      DataType type, ReduceOp op);
  void gather(const void* in, void* out, std::size_t count, DataType type,
              int root);
  void scatter(const void* in, void* out, std::size_t count, DataType type,
               int root);
  void alltoall(const void* in, void* out, std::size_t count, DataType type);
  void allgatherv(const void* in, void* out,
                  std::span<const std::size_t> counts, DataType type);
  void alltoallv(const void* in, std::span<const std::size_t> in_counts,
                 void* out, std::span<const std::size_t> out_counts,
                 DataType type);
  // ncclCommSplit: the new communicator's Impl (nullptr for kNoColor),
  // whose rendezvous keys are under `prefix`.
  std::unique_ptr<Impl> split(int color, int key, const std::string& prefix);

  // isend and irecv wait here until a wait() (or any other operation of the
  // communicator) launches every one of them as one NCCL group: a rank's
  // sends and receives then pair with its peers' whatever their order.
  struct Pending {
    bool send = false;
    void* data = nullptr;  // The caller's buffer.
    std::size_t count = 0;
    DataType type = DataType::kUint8;
    int peer = 0;
    void* device = nullptr;  // Its staging buffer (cudaMalloc'd) or data.
    bool launched = false;
    bool finished = false;
    std::string error;
  };
  std::shared_ptr<Pending> Post(bool send, void* data, std::size_t count,
                                DataType type, int peer, std::uint32_t tag);
  // Launches the pending operations not launched yet, as one group.
  void Launch(const std::string& what);
  // Waits for `p` (launching it first), then copies a staged receive out.
  void Finish(Pending& p, std::chrono::milliseconds timeout);
  std::vector<std::shared_ptr<Pending>> pending_;

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  using Clock = std::chrono::steady_clock;

  // Polls start at 100 us and grow to 1 ms: a short collective returns within
  // a fraction of a millisecond, a long wait costs the CPU little.
  static constexpr std::chrono::microseconds kFirstPause{100};
  static constexpr std::chrono::microseconds kLongestPause{1000};
  // How long a wait goes on for what a peer sent before it passed its test
  // and ended (its process gone, its part done): the data may still be
  // arriving. A peer that failed or died gets no such wait (nor does the
  // failure grace, which is running then, have to outlast it).
  static constexpr std::chrono::seconds kEndedPeerDrain{2};

  // Throws CommError "[rank r/n] <what>: <cause>"; `what` says what failed
  // ("allreduce of 8 float32 (sum) failed").
  [[noreturn]] void Fail(const std::string& what, const std::string& cause);
  // Aborts, remembers `cause` and throws as Fail() does.
  [[noreturn]] void Break(const std::string& what, const std::string& cause);
  // Break() for a peer's end (the arena says it ended while this rank
  // waited): the error is noted as following from that peer's.
  [[noreturn]] void BreakForPeer(const std::string& what,
                                 const std::string& cause);
  // Aborts the communicator once and remembers `cause`; returns `cause`
  // with what was done.
  std::string Abort(const std::string& what, const std::string& cause);
  // Throws when the communicator is broken or aborted; starts the deadline,
  // makes device() the calling thread's current device and waits for NCCL
  // to leave ncclInProgress (raw calls of the test's own may leave it there).
  void Check(const std::string& what);
  // Check(), then orders stream() after the work queued on stream 0.
  void Begin(const std::string& what);
  // Calls `call` with the NCCL communicator (under mu_), checks its result,
  // then waits until NCCL has left ncclInProgress: the work is on the stream.
  void Enqueue(const std::string& what,
               const std::function<ncclResult_t(ncclComm_t)>& call);
  // Waits until NCCL has left ncclInProgress and the stream is idle.
  void Wait(const std::string& what);
  // Polls until NCCL is out of ncclInProgress and, with `stream`, until the
  // stream has finished; breaks on an error or past the deadline.
  void Poll(const std::string& what, bool stream);
  // A device buffer of at least `bytes` bytes (the stream must be idle).
  void* Scratch(const std::string& what, std::size_t bytes);
  // Compares `call` with every rank's through the arena, if there is one;
  // a mismatch (or a peer that does not come) breaks the communicator.
  void CheckCall(const std::string& what, const CollectiveCall& call);
  // Runs one operation: `in` (in_bytes) on the device, copied there first
  // when it is host memory, `out` (out_bytes) likewise, copied back after;
  // `body` enqueues the NCCL calls on the device buffers. Either may be
  // null or empty (a rank that does not use it). A device `in` that
  // overlaps a device `out` is read from a copy, unless it starts at
  // `in_place` (NCCL's in-place form of the operation; 0: it has none):
  // NCCL reads the input while it writes the output, and every backend
  // reads the input as it was at the call, however the two overlap.
  void Run(
      const std::string& what, DataType type, const CollectiveCall& call,
      const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
      const std::function<ncclResult_t(ncclComm_t, const char*, char*)>& body,
      std::uintptr_t in_place = 0);
  // Calls cudaMemcpyAsync on the stream; breaks on failure.
  void Copy(const std::string& what, void* to, const void* from,
            std::size_t bytes, cudaMemcpyKind kind);
  // Whether `p` is memory that NCCL can use (device or managed).
  bool OnDevice(const void* p);
  void CheckPeer(const char* op, int peer) const;
  // Throws CommError for a root out of range, after failing the peers'
  // comparison with this rank's call.
  void CheckRootFor(const std::string& what, const char* op,
                    const CollectiveCall& call, int root);
  // Throws as Fail() does for a type NCCL does not have (int16, uint16).
  void CheckType(const std::string& what, DataType type);
  void CheckTag(const char* op, std::uint32_t tag) const;
  std::string NcclCause(ncclResult_t result);

  const int rank_;
  const int size_;
  const int device_;
  const std::string prefix_;
  // The store's scope where it was made (the split ones inherit it) and the
  // splits this rank has made of it: with prefix_, what names a split one
  // alike on every rank, so the ledger compares its calls across them.
  std::string scope_;
  int splits_ = 0;
  std::chrono::milliseconds timeout_;
  const std::shared_ptr<HostArena> arena_;
  // Where the harness marks the ranks that ended: the world's arena (arena_
  // on the world communicator; a split one's calls are not compared there,
  // but its members' ends are read there), or null. world_ranks_: this
  // communicator's ranks' numbers in the world (empty: the same).
  std::shared_ptr<HostArena> ends_;
  std::vector<int> world_ranks_;
  int WorldRank(int r) const {
    return world_ranks_.empty() ? r : world_ranks_[static_cast<std::size_t>(r)];
  }
  // Every rank's color and key (two a rank), gathered on this communicator
  // before a split, for the new one's world_ranks_ (NCCL does not say).
  std::vector<std::int32_t> GatherColors(const std::string& what, int color,
                                         int key);
  Clock::time_point deadline_{};
  // The peers the operation in progress waits for, where it is a send or
  // receive (a peer that ended breaks it; another rank's end does not:
  // survivors of an expected end may go on); empty: every rank.
  std::vector<int> waits_for_;
  // Sets waits_for_ for one operation: `peers` and those of the isends and
  // irecvs pending, which go on the stream with it. The old value comes
  // back at the end.
  class WaitsFor {
   public:
    WaitsFor(Impl& impl, std::vector<int> peers) : impl_(impl) {
      for (const auto& p : impl_.pending_) peers.push_back(p->peer);
      old_ = std::exchange(impl_.waits_for_, std::move(peers));
    }
    ~WaitsFor() { impl_.waits_for_ = std::move(old_); }
    WaitsFor(const WaitsFor&) = delete;
    WaitsFor& operator=(const WaitsFor&) = delete;

   private:
    Impl& impl_;
    std::vector<int> old_;
  };
  // The rank the operation in progress waits for that has ended (the arena
  // says so), by its number in the world, or -1.
  int EndedPeer() const;

  // Guards comm_, aborted_ and broken_ against Abort() from another thread.
  mutable std::mutex mu_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::string broken_;  // Why the communicator broke; empty while healthy.

  cudaStream_t stream_ = nullptr;
  cudaEvent_t legacy_done_ = nullptr;  // Orders stream_ after stream 0.
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

// "allreduce of 8 float32" and the like, for messages.
std::string DescribeNcclOp(const char* op, std::size_t count, DataType type);
ncclDataType_t NcclType(DataType type);
ncclRedOp_t NcclOp(ReduceOp op);
// As NcclOp(op), for elements of `type`: a bool's sum is "or" (max).
ncclRedOp_t NcclOp(DataType type, ReduceOp op);
// "cudaSetDevice(0) failed: no CUDA-capable device is detected
// (cudaErrorNoDevice)"
std::string CudaCause(const std::string& call, cudaError_t error);

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_NCCL_COMMUNICATOR_IMPL_H_
