// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's operations (nccl_communicator.cc creates and ends it):
// each checks the call against the other ranks' (the host arena), stages
// host buffers through a device scratch buffer, enqueues on the stream and
// waits, bounded by the timeout.
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/host_arena.h"
#include "comm/nccl_communicator_impl.h"
#include "disttest/error.h"

namespace disttest {

void NcclCommunicator::Impl::barrier() {
  const std::string what = "barrier failed";
  Begin(what);
  CheckCall(what, CollectiveCall::Barrier());
  void* flag = Scratch(what, sizeof(std::int32_t));
  cudaError_t error = cudaMemsetAsync(flag, 0, sizeof(std::int32_t), stream_);
  if (error != cudaSuccess) Break(what, CudaCause("cudaMemsetAsync", error));
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclAllReduce(flag, flag, 1, ncclInt32, ncclSum, comm, stream_);
  });
  Wait(what);
}

// Host buffers go through the scratch buffer: copy in, run, wait, copy out,
// wait. Each copy finds the stream idle, so a copy from pageable memory
// (which may wait for the stream) never waits for a collective.
void NcclCommunicator::Impl::allreduce(void* data, std::size_t count,
                                       DataType type, ReduceOp op) {
  if (count == 0 && arena_ == nullptr) return;
  const std::string what = fmt::format(
      "{} ({}) failed", DescribeNcclOp("allreduce", count, type), Name(op));
  CheckType(what, type);
  Begin(what);
  CheckCall(what, CollectiveCall::AllReduce(count, type, op));
  if (count == 0) return;
  const std::size_t bytes = count * SizeOf(type);
  const bool staged = !OnDevice(data);
  void* buffer = staged ? Scratch(what, bytes) : data;
  if (staged) Copy(what, buffer, data, bytes, cudaMemcpyHostToDevice);
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclAllReduce(buffer, buffer, count, NcclType(type),
                         NcclOp(type, op), comm, stream_);
  });
  Wait(what);
  if (staged) {
    Copy(what, data, buffer, bytes, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

void NcclCommunicator::Impl::broadcast(void* data, std::size_t count,
                                       DataType type, int root) {
  if (root < 0 || root >= size_) {
    // Peers with a valid root would otherwise wait for this rank.
    if (arena_ != nullptr) {
      CheckCall(fmt::format("{} from rank {} failed",
                            DescribeNcclOp("broadcast", count, type), root),
                CollectiveCall::Broadcast(count, type, root));
    }
    throw CommError(fmt::format("[rank {}/{}] broadcast: invalid root rank {}",
                                rank_, size_, root));
  }
  if (count == 0 && arena_ == nullptr) return;
  const std::string what = fmt::format(
      "{} from rank {} failed", DescribeNcclOp("broadcast", count, type), root);
  CheckType(what, type);
  Begin(what);
  CheckCall(what, CollectiveCall::Broadcast(count, type, root));
  if (count == 0) return;
  const std::size_t bytes = count * SizeOf(type);
  const bool staged = !OnDevice(data);
  void* buffer = staged ? Scratch(what, bytes) : data;
  if (staged && rank_ == root) {
    Copy(what, buffer, data, bytes, cudaMemcpyHostToDevice);
  }
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclBroadcast(buffer, buffer, count, NcclType(type), root, comm,
                         stream_);
  });
  Wait(what);
  if (staged && rank_ != root) {
    Copy(what, data, buffer, bytes, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

void NcclCommunicator::Impl::allgather(const void* in, void* out,
                                       std::size_t count, DataType type) {
  if (count == 0 && arena_ == nullptr) return;
  const std::string what =
      fmt::format("{} failed", DescribeNcclOp("allgather", count, type));
  CheckType(what, type);
  Begin(what);
  CheckCall(what, CollectiveCall::AllGather(count, type));
  if (count == 0) return;
  const std::size_t bytes = count * SizeOf(type);
  const std::size_t total = bytes * static_cast<std::size_t>(size_);
  const bool staged_out = !OnDevice(out);
  char* out_buffer =
      static_cast<char*>(staged_out ? Scratch(what, total) : out);
  const void* in_buffer = in;
  if (!OnDevice(in)) {
    // In place: NCCL reads this rank's part of the output buffer.
    in_buffer = out_buffer + static_cast<std::size_t>(rank_) * bytes;
    Copy(what, const_cast<void*>(in_buffer), in, bytes, cudaMemcpyHostToDevice);
  }
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclAllGather(in_buffer, out_buffer, count, NcclType(type), comm,
                         stream_);
  });
  Wait(what);
  if (staged_out) {
    Copy(what, out, out_buffer, total, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

void NcclCommunicator::Impl::send(const void* data, std::size_t count,
                                  DataType type, int peer, std::uint32_t tag) {
  CheckPeer("send", peer);
  CheckTag("send", tag);
  if (count == 0) return;
  const std::string what = fmt::format(
      "{} to rank {} failed", DescribeNcclOp("send", count, type), peer);
  CheckType(what, type);
  Begin(what);
  const std::size_t bytes = count * SizeOf(type);
  const void* buffer = data;
  if (!OnDevice(data)) {
    void* staged = Scratch(what, bytes);
    Copy(what, staged, data, bytes, cudaMemcpyHostToDevice);
    buffer = staged;
  }
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclSend(buffer, count, NcclType(type), peer, comm, stream_);
  });
  Wait(what);
}

void NcclCommunicator::Impl::recv(void* data, std::size_t count, DataType type,
                                  int peer, std::uint32_t tag) {
  CheckPeer("recv", peer);
  CheckTag("recv", tag);
  if (count == 0) return;
  const std::string what = fmt::format(
      "{} from rank {} failed", DescribeNcclOp("recv", count, type), peer);
  CheckType(what, type);
  Begin(what);
  const std::size_t bytes = count * SizeOf(type);
  const bool staged = !OnDevice(data);
  void* buffer = staged ? Scratch(what, bytes) : data;
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclRecv(buffer, count, NcclType(type), peer, comm, stream_);
  });
  Wait(what);
  if (staged) {
    Copy(what, data, buffer, bytes, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

}  // namespace disttest
