// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's sends and receives: send and recv wait for their
// own; isend and irecv wait as Pending until a wait (or any other
// operation) launches every one of them as one NCCL group. NCCL has no
// tags: only tag 0 is taken.
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/nccl_communicator_impl.h"
#include "comm/nccl_group.h"
#include "disttest/error.h"

namespace disttest {

void NcclCommunicator::Impl::CheckPeer(const char* op, int peer) const {
  if (peer == rank_) {
    throw CommError(fmt::format(
        "[rank {}/{}] {}: the peer is this rank itself, which disttest's NCCL "
        "backend does not pair (its buffers are on the GPU): copy the data",
        rank_, size_, op));
  }
  if (peer < 0 || peer >= size_) {
    throw CommError(fmt::format("[rank {}/{}] {}: invalid peer rank {}", rank_,
                                size_, op, peer));
  }
}

void NcclCommunicator::Impl::CheckTag(const char* op, std::uint32_t tag) const {
  if (tag != 0) {
    throw CommError(fmt::format(
        "[rank {}/{}] backend nccl does not support tagged {} (tag {}): NCCL "
        "pairs sends and receives in call order; use tag 0",
        rank_, size_, op, tag));
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
  WaitsFor waits(*this, {peer});
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
  WaitsFor waits(*this, {peer});
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
  WaitsFor waits(*this, {});  // The pending operations' peers.
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

namespace {
// An isend or irecv, launched with the others at the first wait.
class NcclRequest : public RequestState {
 public:
  explicit NcclRequest(std::function<void(std::chrono::milliseconds)> wait)
      : wait_(std::move(wait)) {}
  void Wait(std::chrono::milliseconds timeout) override { wait_(timeout); }

 private:
  std::function<void(std::chrono::milliseconds)> wait_;
};
}  // namespace

std::unique_ptr<RequestState> NcclCommunicator::DoISend(const void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  auto pending =
      impl_->Post(true, const_cast<void*>(data), count, type, peer, tag);
  Impl* impl = impl_.get();
  return std::make_unique<NcclRequest>(
      [impl, pending](std::chrono::milliseconds t) {
        impl->Finish(*pending, t);
      });
}
std::unique_ptr<RequestState> NcclCommunicator::DoIRecv(void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  auto pending = impl_->Post(false, data, count, type, peer, tag);
  Impl* impl = impl_.get();
  return std::make_unique<NcclRequest>(
      [impl, pending](std::chrono::milliseconds t) {
        impl->Finish(*pending, t);
      });
}

}  // namespace disttest
