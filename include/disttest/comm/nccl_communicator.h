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
#include <memory>
#include <string>

#include "disttest/comm/comm_options.h"
#include "disttest/comm/communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

// CommOptions (prefix "nccl" here, timeout, arena) and the device. With an
// arena (the harness's spawned ranks), every rank's call is compared there
// before each collective, so that ranks that disagree fail at once instead
// of hanging in NCCL or reducing mismatched buffers; the data still goes
// through NCCL.
struct NcclOptions : CommOptions {
  NcclOptions() { prefix = "nccl"; }
  // The CUDA device of this rank, an index among the visible devices. The
  // harness shows each rank its own GPU first: device 0.
  int device = 0;
};

class NcclCommunicator : public Communicator {
 public:
  // Sets the device, makes the stream and initialises NCCL. Throws
  // CommError on failure, e.g. on a machine without a GPU:
  //   "[rank 0/1] cannot create the nccl communicator on device 0:
  //    cudaSetDevice(0) failed: no CUDA-capable device is detected
  //    (cudaErrorNoDevice)"
  // Collective: `where` (the caller's line) names the wait for the other
  // ranks in a report.
  static std::unique_ptr<NcclCommunicator> Create(
      Store& store, int rank, int size, const NcclOptions& options,
      CallSite where = CallSite::current());
  // A clean end finalises and destroys the NCCL communicator (bounded by
  // the timeout; past it, aborts); a broken or aborted one is left as it
  // is. Never throws.
  ~NcclCommunicator() override;

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  const char* backend_name() const override { return "nccl"; }
  bool failed() const override;

  // The raw handles, for NCCL calls and kernels of the test's own.
  // nccl_comm() is null once the communicator is aborted.
  ncclComm_t nccl_comm() const;
  cudaStream_t stream() const;
  int device() const;

  // Waits until NCCL has left ncclInProgress and everything queued on
  // stream() has finished, bounded by the timeout; on an error or past the
  // deadline, aborts and throws CommError like the operations below.
  void Synchronize();

  // Aborts the NCCL communicator (ncclCommAbort): work in flight stops and
  // every later operation throws CommError. Idempotent; may be called from
  // another thread while an operation waits, which then throws.
  void Abort();

 protected:
  bool BuffersOnHost() const override { return false; }
  // An allreduce of one int32 in device memory.
  void DoBarrier() override;
  void DoAllReduce(void* data, std::size_t count, DataType type,
                   ReduceOp op) override;
  void DoBroadcast(void* data, std::size_t count, DataType type,
                   int root) override;
  void DoAllGather(const void* in, void* out, std::size_t count,
                   DataType type) override;
  // ncclSend/ncclRecv: returns when NCCL has finished the transfer on this
  // side. Pairs with the peer's recv/send in call order; `tag` must be 0.
  void DoSend(const void* data, std::size_t count, DataType type, int peer,
              std::uint32_t tag) override;
  void DoRecv(void* data, std::size_t count, DataType type, int peer,
              std::uint32_t tag) override;
  // NCCL's own: ncclReduce, ncclReduceScatter, out-of-place ncclAllReduce
  // and ncclBroadcast, ncclCommSplit. gather, scatter, alltoall(v) and
  // allgatherv are one group of ncclSend and ncclRecv each (alltoallv after
  // an allgather of every rank's counts, which every rank checks).
  void DoAllReduceOutOfPlace(const void* in, void* out, std::size_t count,
                             DataType type, ReduceOp op) override;
  void DoBroadcastOutOfPlace(const void* in, void* out, std::size_t count,
                             DataType type, int root) override;
  void DoReduce(const void* in, void* out, std::size_t count, DataType type,
                ReduceOp op, int root) override;
  void DoReduceScatter(const void* in, void* out, std::size_t count,
                       DataType type, ReduceOp op) override;
  void DoGather(const void* in, void* out, std::size_t count, DataType type,
                int root) override;
  void DoScatter(const void* in, void* out, std::size_t count, DataType type,
                 int root) override;
  void DoAllToAll(const void* in, void* out, std::size_t count,
                  DataType type) override;
  void DoAllGatherV(const void* in, void* out,
                    std::span<const std::size_t> counts,
                    DataType type) override;
  void DoAllToAllV(const void* in, std::span<const std::size_t> in_counts,
                   void* out, std::span<const std::size_t> out_counts,
                   DataType type) override;
  std::unique_ptr<Communicator> DoSplit(int color, int key) override;
  // isend and irecv are launched together, as one NCCL group, at the first
  // wait() or other operation after them; `tag` must be 0.
  std::unique_ptr<RequestState> DoISend(const void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;
  std::unique_ptr<RequestState> DoIRecv(void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;
  void DoSetTimeout(std::chrono::milliseconds timeout) override;

 private:
  class Impl;  // comm/nccl_communicator_impl.h
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_NCCL_COMMUNICATOR_H_
