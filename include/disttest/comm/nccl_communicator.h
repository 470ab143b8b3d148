// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator: the GPU backend, one NCCL communicator and one CUDA
// stream per rank. Built only when disttest is built with CUDA and NCCL
// (DISTTEST_HAVE_NCCL is then defined for every user of disttest); not in
// disttest.h, so that CPU tests never see the CUDA headers.
//
//   #include <disttest/comm/nccl_communicator.h>
//
//   auto comm = disttest::NcclCommunicator::Create(
//       store, env.rank, env.world_size, {.device = 0});
//   float* d;  cudaMalloc(&d, 8 * sizeof(float));   // or a host buffer
//   comm->allreduce(d, 8, disttest::ReduceOp::kSum);  // waits for the result
//   ncclAllReduce(d, d, 8, ncclFloat, ncclSum, comm->nccl_comm(),
//                 comm->stream());                    // raw NCCL, same comm
//   comm->Synchronize();
//
// Create() is collective: rank 0 makes the ncclUniqueId and puts it in the
// store under `prefix`; every rank initialises its NCCL communicator on
// `device`. The portable operations take device (or managed) pointers, used
// as they are, and host pointers, staged through a device buffer of the
// communicator's; each returns when the result is in place. They run on
// stream(), ordered after the work already queued on the legacy default
// stream (cudaMemset, cudaMemcpy, kernels launched on stream 0).
//
// Every wait is bounded by options.timeout. When NCCL reports an error or a
// wait runs out, the communicator is aborted (ncclCommAbort), stays broken
// and the call throws CommError: "[rank 1/4] allreduce of 8 float32 (sum)
// failed: timed out after 30000 ms; the nccl communicator is aborted". NCCL
// has no tags: send/recv with a tag other than 0 throw "[rank 0/2] backend
// nccl does not support tagged send (tag 3)".
//
// The communicator is non-blocking (ncclConfig_t.blocking = 0) so that it
// can always be aborted: raw NCCL calls on nccl_comm() may return
// ncclInProgress, which is not an error; call Synchronize() before using the
// result. Fork caveat: CUDA does not survive fork(); create the communicator
// in the rank process that uses it, never in a parent that forks.
#ifndef DISTTEST_COMM_NCCL_COMMUNICATOR_H_
#define DISTTEST_COMM_NCCL_COMMUNICATOR_H_

#if !DISTTEST_HAVE_NCCL
#error "disttest was built without CUDA and NCCL (DISTTEST_WITH_NCCL)"
#endif

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/comm/host_arena.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

struct NcclOptions {
  // The CUDA device of this rank, an index among the visible devices. The
  // harness shows each rank its own GPU first: device 0.
  int device = 0;
  // Key prefix in the store for this communicator's ncclUniqueId.
  std::string prefix = "nccl";
  // Bounds the rendezvous, the initialisation and every operation.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Ranks on one host (the harness's spawned ranks): before each collective
  // every rank's call is compared in this arena (HostArena::Check), so that
  // ranks that disagree fail at once instead of hanging in NCCL or
  // reducing mismatched buffers. The data still goes through NCCL.
  std::shared_ptr<HostArena> arena;
};

class NcclCommunicator : public Communicator {
 public:
  // Sets the device, makes the stream and initialises NCCL. Throws
  // CommError on failure, e.g. on a machine without a GPU:
  //   "[rank 0/1] cannot create the nccl communicator on device 0:
  //    cudaSetDevice(0) failed: no CUDA-capable device is detected
  //    (cudaErrorNoDevice)"
  static std::unique_ptr<NcclCommunicator> Create(Store& store, int rank,
                                                  int size,
                                                  const NcclOptions& options);
  // A clean end finalises and destroys the NCCL communicator (bounded by
  // the timeout; past it, aborts); a broken or aborted one is left as it
  // is. Never throws.
  ~NcclCommunicator() override;

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "nccl"; }
  bool failed() const override;

  // The raw handles, for NCCL calls and kernels of the test's own.
  // nccl_comm() is null once the communicator is aborted.
  ncclComm_t nccl_comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

  // Waits until NCCL has left ncclInProgress and everything queued on
  // stream() has finished, bounded by the timeout; on an error or past the
  // deadline, aborts and throws CommError like the operations below.
  void Synchronize();

  // Aborts the NCCL communicator (ncclCommAbort): work in flight stops and
  // every later operation throws CommError. Idempotent; may be called from
  // another thread while an operation waits, which then throws.
  void Abort();

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;
  using Communicator::recv;
  using Communicator::send;
  // An allreduce of one int32 in device memory.
  void barrier() override;
  void allreduce(void* data, std::size_t count, DataType type,
                 ReduceOp op) override;
  void broadcast(void* data, std::size_t count, DataType type,
                 int root) override;
  void allgather(const void* in, void* out, std::size_t count,
                 DataType type) override;
  // ncclSend/ncclRecv: returns when NCCL has finished the transfer on this
  // side. Pairs with the peer's recv/send in call order; `tag` must be 0.
  void send(const void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag) override;
  void recv(void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag) override;

 private:
  NcclCommunicator(int rank, int size, const NcclOptions& options);

  using Clock = std::chrono::steady_clock;

  void Init(Store& store);
  // Throws CommError "[rank r/n] <what>: <cause>"; `what` says what failed
  // ("allreduce of 8 float32 (sum) failed").
  [[noreturn]] void Fail(const std::string& what, const std::string& cause);
  // Aborts, remembers `cause` and throws as Fail() does.
  [[noreturn]] void Break(const std::string& what, const std::string& cause);
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
  // Calls cudaMemcpyAsync on the stream; breaks on failure.
  void Copy(const std::string& what, void* to, const void* from,
            std::size_t bytes, cudaMemcpyKind kind);
  // Whether `p` is memory that NCCL can use (device or managed).
  bool OnDevice(const void* p);
  void CheckPeer(const char* op, int peer) const;
  void CheckTag(const char* op, std::uint32_t tag) const;
  std::string NcclCause(ncclResult_t result);

  const int rank_;
  const int size_;
  const int device_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<HostArena> arena_;
  Clock::time_point deadline_{};

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

}  // namespace disttest

#endif  // DISTTEST_COMM_NCCL_COMMUNICATOR_H_
