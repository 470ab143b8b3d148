// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's operations (nccl_communicator.cc creates and ends it):
// each checks the call against the other ranks' (the host arena), stages
// host buffers through a device scratch buffer, enqueues on the stream and
// waits, bounded by the timeout.
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <memory>
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

void NcclCommunicator::Impl::Run(
    const std::string& what, DataType type, const CollectiveCall& call,
    const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
    const std::function<ncclResult_t(ncclComm_t, const char*, char*)>& body) {
  CheckType(what, type);
  Begin(what);
  CheckCall(what, call);
  const bool stage_in = in != nullptr && in_bytes > 0 && !OnDevice(in);
  const bool stage_out = out != nullptr && out_bytes > 0 && !OnDevice(out);
  const std::size_t out_at = stage_in ? (in_bytes + 255) / 256 * 256 : 0;
  char* scratch = nullptr;
  if (stage_in || stage_out) {
    scratch =
        static_cast<char*>(Scratch(what, out_at + (stage_out ? out_bytes : 0)));
  }
  const char* din = stage_in ? scratch : static_cast<const char*>(in);
  char* dout = stage_out ? scratch + out_at : static_cast<char*>(out);
  if (stage_in) Copy(what, scratch, in, in_bytes, cudaMemcpyHostToDevice);
  Enqueue(what, [&](ncclComm_t comm) { return body(comm, din, dout); });
  Wait(what);
  if (stage_out) {
    Copy(what, out, dout, out_bytes, cudaMemcpyDeviceToHost);
    Wait(what);
  }
}

namespace {

// Runs `calls` (each an NCCL call's result) between ncclGroupStart and
// ncclGroupEnd; the first error ends the group and is the result.
template <typename Calls>
ncclResult_t Group(Calls&& calls) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  result = calls();
  const ncclResult_t end = ncclGroupEnd();
  return result != ncclSuccess && result != ncclInProgress ? result : end;
}

// Stops a group's loop at the first error.
bool Failed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }

}  // namespace

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
  Run(what, type, CollectiveCall::AllReduce(count, type, op), in, bytes, out,
      bytes, [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclAllReduce(din, dout, count, NcclType(type), NcclOp(type, op),
                             comm, stream_);
      });
}

void NcclCommunicator::Impl::broadcast(const void* in, void* out,
                                       std::size_t count, DataType type,
                                       int root) {
  const CollectiveCall call = CollectiveCall::Broadcast(count, type, root);
  const std::string what = fmt::format(
      "{} from rank {} failed", DescribeNcclOp("broadcast", count, type), root);
  CheckRootFor(what, "broadcast", call, root);
  const std::size_t bytes = count * SizeOf(type);
  Run(what, type, call, rank_ == root ? in : nullptr, bytes, out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclBroadcast(din, dout, count, NcclType(type), root, comm,
                             stream_);
      });
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
  Run(what, type, call, in, bytes, rank_ == root ? out : nullptr, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclReduce(din, dout, count, NcclType(type), NcclOp(type, op),
                          root, comm, stream_);
      });
}

void NcclCommunicator::Impl::reduce_scatter(const void* in, void* out,
                                            std::size_t count, DataType type,
                                            ReduceOp op) {
  const std::size_t bytes = count * SizeOf(type);
  const std::string what =
      fmt::format("{} ({}) failed",
                  DescribeNcclOp("reduce_scatter", count, type), Name(op));
  Run(what, type, CollectiveCall::ReduceScatter(count, type, op), in,
      bytes * static_cast<std::size_t>(size_), out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return ncclReduceScatter(din, dout, count, NcclType(type),
                                 NcclOp(type, op), comm, stream_);
      });
}

void NcclCommunicator::Impl::gather(const void* in, void* out,
                                    std::size_t count, DataType type,
                                    int root) {
  const CollectiveCall call = CollectiveCall::Gather(count, type, root);
  const std::string what = fmt::format(
      "{} (root {}) failed", DescribeNcclOp("gather", count, type), root);
  CheckRootFor(what, "gather", call, root);
  const std::size_t bytes = count * SizeOf(type);
  const bool is_root = rank_ == root;
  Run(what, type, call, in, bytes, is_root ? out : nullptr,
      is_root ? bytes * static_cast<std::size_t>(size_) : 0,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; is_root && q < size_ && !Failed(r); ++q) {
            r = ncclRecv(dout + static_cast<std::size_t>(q) * bytes, count,
                         NcclType(type), q, comm, stream_);
          }
          if (!Failed(r)) {
            r = ncclSend(din, count, NcclType(type), root, comm, stream_);
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::scatter(const void* in, void* out,
                                     std::size_t count, DataType type,
                                     int root) {
  const CollectiveCall call = CollectiveCall::Scatter(count, type, root);
  const std::string what = fmt::format(
      "{} (root {}) failed", DescribeNcclOp("scatter", count, type), root);
  CheckRootFor(what, "scatter", call, root);
  const std::size_t bytes = count * SizeOf(type);
  const bool is_root = rank_ == root;
  Run(what, type, call, is_root ? in : nullptr,
      is_root ? bytes * static_cast<std::size_t>(size_) : 0, out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; is_root && q < size_ && !Failed(r); ++q) {
            r = ncclSend(din + static_cast<std::size_t>(q) * bytes, count,
                         NcclType(type), q, comm, stream_);
          }
          if (!Failed(r)) {
            r = ncclRecv(dout, count, NcclType(type), root, comm, stream_);
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::alltoall(const void* in, void* out,
                                      std::size_t count, DataType type) {
  const std::size_t bytes = count * SizeOf(type);
  const std::size_t all = bytes * static_cast<std::size_t>(size_);
  const std::string what =
      fmt::format("{} failed", DescribeNcclOp("alltoall", count, type));
  Run(what, type, CollectiveCall::AllToAll(count, type), in, all, out, all,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; q < size_ && !Failed(r); ++q) {
            const std::size_t at = static_cast<std::size_t>(q) * bytes;
            r = ncclSend(din + at, count, NcclType(type), q, comm, stream_);
            if (!Failed(r)) {
              r = ncclRecv(dout + at, count, NcclType(type), q, comm, stream_);
            }
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::allgatherv(const void* in, void* out,
                                        std::span<const std::size_t> counts,
                                        DataType type) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  const CollectiveCall call =
      CollectiveCall::AllGatherV(type, counts.data(), counts.size());
  const std::string what =
      fmt::format("{} failed", DescribeNcclOp("allgatherv", total, type));
  if (counts.size() != static_cast<std::size_t>(size_)) {
    if (arena_ != nullptr) {
      try {
        CheckCall(what, call);
      } catch (const CommError&) {
      }
    }
    throw CommError(fmt::format(
        "[rank {}/{}] allgatherv: {} counts given, one per rank is {}", rank_,
        size_, counts.size(), size_));
  }
  const std::size_t size = SizeOf(type);
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  Run(what, type, call, in, mine * size, out, total * size,
      [&](ncclComm_t comm, const char* din, char* dout) {
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          std::size_t at = 0;
          for (int q = 0; q < size_ && !Failed(r); ++q) {
            const std::size_t theirs = counts[static_cast<std::size_t>(q)];
            if (mine > 0) {
              r = ncclSend(din, mine, NcclType(type), q, comm, stream_);
            }
            if (!Failed(r) && theirs > 0) {
              r = ncclRecv(dout + at * size, theirs, NcclType(type), q, comm,
                           stream_);
            }
            at += theirs;
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::alltoallv(const void* in,
                                       std::span<const std::size_t> in_counts,
                                       void* out,
                                       std::span<const std::size_t> out_counts,
                                       DataType type) {
  const std::size_t world = static_cast<std::size_t>(size_);
  const CollectiveCall call = CollectiveCall::AllToAllV(type);
  std::size_t sent = 0, received = 0;
  for (std::size_t c : in_counts) sent += c;
  for (std::size_t c : out_counts) received += c;
  const std::string what =
      fmt::format("alltoallv of {} {} sent failed", sent, Name(type));
  if (in_counts.size() != world || out_counts.size() != world) {
    if (arena_ != nullptr) {
      try {
        CheckCall(what, call);
      } catch (const CommError&) {
      }
    }
    throw CommError(fmt::format(
        "[rank {}/{}] alltoallv: {} in_counts and {} out_counts given, one "
        "per rank is {}",
        rank_, size_, in_counts.size(), out_counts.size(), world));
  }
  // Every rank's counts, both ways: every rank checks every pair, and all
  // fail alike.
  std::vector<std::uint64_t> mine(2 * world);
  for (std::size_t q = 0; q < world; ++q) {
    mine[q] = in_counts[q];
    mine[world + q] = out_counts[q];
  }
  std::vector<std::uint64_t> all(2 * world * world);
  Run(what, DataType::kUint64, call, mine.data(), mine.size() * 8, all.data(),
      all.size() * 8, [&](ncclComm_t comm, const char* din, char* dout) {
        return ncclAllGather(din, dout, 2 * world, ncclUint64, comm, stream_);
      });
  for (std::size_t a = 0; a < world; ++a) {
    for (std::size_t b = 0; b < world; ++b) {
      const std::uint64_t sends = all[a * 2 * world + b];
      const std::uint64_t expects = all[b * 2 * world + world + a];
      if (sends != expects) {
        Fail(what, fmt::format("rank {} sends {} x {} to rank {}, which "
                               "expects {}",
                               a, sends, Name(type), b, expects));
      }
    }
  }
  const std::size_t size = SizeOf(type);
  Run(what, type, call, in, sent * size, out, received * size,
      [&](ncclComm_t comm, const char* din, char* dout) {
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          std::size_t from = 0, to = 0;
          for (std::size_t q = 0; q < world && !Failed(r); ++q) {
            const int peer = static_cast<int>(q);
            if (in_counts[q] > 0) {
              r = ncclSend(din + from * size, in_counts[q], NcclType(type),
                           peer, comm, stream_);
            }
            if (!Failed(r) && out_counts[q] > 0) {
              r = ncclRecv(dout + to * size, out_counts[q], NcclType(type),
                           peer, comm, stream_);
            }
            from += in_counts[q];
            to += out_counts[q];
          }
          return r;
        });
      });
}

std::shared_ptr<NcclCommunicator::Impl::Pending> NcclCommunicator::Impl::Post(
    bool send, void* data, std::size_t count, DataType type, int peer,
    std::uint32_t tag) {
  const char* op = send ? "isend" : "irecv";
  CheckPeer(op, peer);
  CheckTag(op, tag);
  const std::string what =
      fmt::format("{} {} rank {} failed", DescribeNcclOp(op, count, type),
                  send ? "to" : "from", peer);
  CheckType(what, type);
  Check(what);
  auto p = std::make_shared<Pending>();
  p->send = send;
  p->data = data;
  p->count = count;
  p->type = type;
  p->peer = peer;
  p->device = data;
  const std::size_t bytes = count * SizeOf(type);
  if (bytes > 0 && !OnDevice(data)) {
    // Its own staging buffer: others may be in flight with it.
    cudaError_t error = cudaMalloc(&p->device, bytes);
    if (error != cudaSuccess) {
      p->device = nullptr;
      Break(what,
            CudaCause(fmt::format("cudaMalloc of {} bytes", bytes), error));
    }
    if (send) {
      error = cudaMemcpy(p->device, data, bytes, cudaMemcpyHostToDevice);
      if (error != cudaSuccess) {
        cudaFree(p->device);
        p->device = nullptr;
        Break(what, CudaCause("cudaMemcpy", error));
      }
    }
  }
  pending_.push_back(p);
  return p;
}

void NcclCommunicator::Impl::Launch(const std::string& what) {
  std::vector<Pending*> todo;
  for (const auto& p : pending_) {
    if (!p->launched && p->count > 0) todo.push_back(p.get());
    p->launched = true;
  }
  if (todo.empty()) return;
  Enqueue(what, [&](ncclComm_t comm) {
    return Group([&] {
      ncclResult_t r = ncclSuccess;
      for (std::size_t i = 0; i < todo.size() && !Failed(r); ++i) {
        const Pending& p = *todo[i];
        r = p.send ? ncclSend(p.device, p.count, NcclType(p.type), p.peer, comm,
                              stream_)
                   : ncclRecv(p.device, p.count, NcclType(p.type), p.peer, comm,
                              stream_);
      }
      return r;
    });
  });
}

void NcclCommunicator::Impl::Finish(Pending& p,
                                    std::chrono::milliseconds timeout) {
  if (p.finished) {
    if (!p.error.empty()) throw CommError(p.error);
    return;
  }
  const std::string what =
      fmt::format("{} {} rank {} failed",
                  DescribeNcclOp(p.send ? "isend" : "irecv", p.count, p.type),
                  p.send ? "to" : "from", p.peer);
  // Every launched operation is done when the stream is idle: all of them
  // are finished here, staged receives copied out, staging buffers freed.
  std::vector<std::shared_ptr<Pending>> done;
  try {
    Check(what);
    deadline_ = Clock::now() + timeout;
    Launch(what);
    Wait(what);
    for (const auto& q : pending_) {
      if (!q->send && q->device != q->data && q->count > 0) {
        Copy(what, q->data, q->device, q->count * SizeOf(q->type),
             cudaMemcpyDeviceToHost);
      }
    }
    Wait(what);
  } catch (const CommError& e) {
    for (const auto& q : pending_) q->error = e.what();
  }
  for (const auto& q : pending_) {
    if (q->device != nullptr && q->device != q->data) cudaFree(q->device);
    q->device = nullptr;
    q->finished = true;
  }
  pending_.clear();
  if (!p.error.empty()) throw CommError(p.error);
}

}  // namespace disttest
