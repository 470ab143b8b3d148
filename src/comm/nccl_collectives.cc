// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's collectives that are one NCCL call each (barrier,
// allreduce, broadcast, allgather, reduce, reduce_scatter): each checks the
// call against the other ranks' (the host arena), stages host buffers
// through a device scratch buffer, enqueues on the stream and waits,
// bounded by the timeout.
#include <fmt/format.h>

#include <functional>
#include <string>

#include "comm/buffer_overlap.h"
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
  char* mine = out_buffer + static_cast<std::size_t>(rank_) * bytes;
  if (!OnDevice(in)) {
    // In place: NCCL reads this rank's part of the output buffer.
    in_buffer = mine;
    Copy(what, mine, in, bytes, cudaMemcpyHostToDevice);
  } else if (!staged_out && internal::OverlapsOtherThanInPlace(
                                in, bytes, out, total,
                                reinterpret_cast<std::uintptr_t>(mine))) {
    // An input that overlaps the output elsewhere than at this rank's part
    // (in == out on rank 1): read from a copy, as the CPU backends read it.
    in_buffer = Scratch(what, bytes);
    Copy(what, const_cast<void*>(in_buffer), in, bytes,
         cudaMemcpyDeviceToDevice);
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

void NcclCommunicator::Impl::CheckCall(const std::string& what,
                                       const CollectiveCall& call) {
  if (arena_ == nullptr) return;
  try {
    arena_->Check(rank_, call, timeout_);
  } catch (const CommError& e) {
    Break(what, e.what());
  }
}

void NcclCommunicator::Impl::Run(
    const std::string& what, DataType type, const CollectiveCall& call,
    const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
    const std::function<ncclResult_t(ncclComm_t, const char*, char*)>& body,
    std::uintptr_t in_place) {
  CheckType(what, type);
  Begin(what);
  CheckCall(what, call);
  const bool host_in = in != nullptr && in_bytes > 0 && !OnDevice(in);
  const bool stage_out = out != nullptr && out_bytes > 0 && !OnDevice(out);
  // Both on the device: an input that overlaps the output otherwise than
  // in place is read from a copy (the CPU backends read it so too).
  const bool overlapping = !host_in && !stage_out && in != nullptr &&
                           in_bytes > 0 && out != nullptr && out_bytes > 0 &&
                           internal::OverlapsOtherThanInPlace(
                               in, in_bytes, out, out_bytes, in_place);
  const bool stage_in = host_in || overlapping;
  const std::size_t out_at = stage_in ? (in_bytes + 255) / 256 * 256 : 0;
  char* scratch = nullptr;
  if (stage_in || stage_out) {
    scratch =
        static_cast<char*>(Scratch(what, out_at + (stage_out ? out_bytes : 0)));
  }
  const char* din = stage_in ? scratch : static_cast<const char*>(in);
  char* dout = stage_out ? scratch + out_at : static_cast<char*>(out);
  if (stage_in) {
    Copy(what, scratch, in, in_bytes,
         host_in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice);
  }
  Enqueue(what, [&](ncclComm_t comm) { return body(comm, din, dout); });
  Wait(what);
  if (stage_out) {
    Copy(what, out, dout, out_bytes, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

void NcclCommunicator::Impl::CheckRootFor(const std::string& what,
                                          const char* op,
                                          const CollectiveCall& call,
                                          int root) {
  if (root >= 0 && root < size_) return;
  // Peers with a valid root would otherwise wait for this rank.
  if (arena_ != nullptr) {
    try {
      CheckCall(what, call);
    } catch (const CommError&) {
    }
  }
  throw CommError(fmt::format("[rank {}/{}] {}: invalid root rank {}", rank_,
                              size_, op, root));
}

void NcclCommunicator::Impl::allreduce(const void* in, void* out,
                                       std::size_t count, DataType type,
                                       ReduceOp op) {
  const std::size_t bytes = count * SizeOf(type);
  const std::string what = fmt::format(
      "{} ({}) failed", DescribeNcclOp("allreduce", count, type), Name(op));
  Run(
      what, type, CollectiveCall::AllReduce(count, type, op), in, bytes, out,
      bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclAllReduce(din, dout, count, NcclType(type), NcclOp(type, op),
                             comm, stream_);
      },
      reinterpret_cast<std::uintptr_t>(out));
}

void NcclCommunicator::Impl::broadcast(const void* in, void* out,
                                       std::size_t count, DataType type,
                                       int root) {
  const CollectiveCall call = CollectiveCall::Broadcast(count, type, root);
  const std::string what = fmt::format(
      "{} from rank {} failed", DescribeNcclOp("broadcast", count, type), root);
  CheckRootFor(what, "broadcast", call, root);
  const std::size_t bytes = count * SizeOf(type);
  Run(
      what, type, call, rank_ == root ? in : nullptr, bytes, out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclBroadcast(din, dout, count, NcclType(type), root, comm,
                             stream_);
      },
      reinterpret_cast<std::uintptr_t>(out));
}

void NcclCommunicator::Impl::reduce(const void* in, void* out,
                                    std::size_t count, DataType type,
                                    ReduceOp op, int root) {
  const CollectiveCall call = CollectiveCall::Reduce(count, type, op, root);
  const std::string what =
      fmt::format("{} ({}, root {}) failed",
                  DescribeNcclOp("reduce", count, type), Name(op), root);
  CheckRootFor(what, "reduce", call, root);
  const std::size_t bytes = count * SizeOf(type);
  Run(
      what, type, call, in, bytes, rank_ == root ? out : nullptr, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclReduce(din, dout, count, NcclType(type), NcclOp(type, op),
                          root, comm, stream_);
      },
      reinterpret_cast<std::uintptr_t>(out));
}

void NcclCommunicator::Impl::reduce_scatter(const void* in, void* out,
                                            std::size_t count, DataType type,
                                            ReduceOp op) {
  const std::size_t bytes = count * SizeOf(type);
  const std::string what =
      fmt::format("{} ({}) failed",
                  DescribeNcclOp("reduce_scatter", count, type), Name(op));
  Run(
      what, type, CollectiveCall::ReduceScatter(count, type, op), in,
      bytes * static_cast<std::size_t>(size_), out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclReduceScatter(din, dout, count, NcclType(type),
                                 NcclOp(type, op), comm, stream_);
      },
      // In place, the output is this rank's part of the input.
      reinterpret_cast<std::uintptr_t>(out) -
          bytes * static_cast<std::size_t>(rank_));
}

}  // namespace disttest
