// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/self_messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "comm/communicator_sockets.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest::internal {
namespace {

std::string Describe(const SelfMessages::Op& op) {
  return fmt::format("{} x {} with tag {}", op.count, Name(op.type), op.tag);
}

class SelfRequest : public RequestState {
 public:
  SelfRequest(std::shared_ptr<SelfMessages::Core> core,
              std::shared_ptr<SelfMessages::Op> op, int rank, int size,
              int slot)
      : core_(std::move(core)),
        op_(std::move(op)),
        rank_(rank),
        size_(size),
        slot_(slot) {}

  // Done waiting, or dropped: an unpaired one leaves, and no later post
  // pairs with it. (A Request that outlived its communicator releases its
  // state without destroying it: its Core stays, unreachable.)
  ~SelfRequest() override {
    const std::lock_guard<std::mutex> lock(core_->mu);
    core_->unpaired.remove(op_);
  }

  void Wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(core_->mu);
    // In slices: a wait ends when disttest cuts the communicators (a
    // launched rank's side thread), as every backend's does.
    const std::uint64_t cuts = CommunicatorCuts();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!op_->done && std::chrono::steady_clock::now() < deadline) {
      core_->cv.wait_for(lock, std::chrono::milliseconds(100),
                         [&] { return op_->done; });
      if (!op_->done && CommunicatorCuts() != cuts) {
        core_->unpaired.remove(op_);
        throw CommError(fmt::format(
            "[rank {}/{}] {} this rank itself ({}): disttest cut the "
            "communicators: {}",
            rank_, size_, op_->send ? "isend to" : "irecv from", Describe(*op_),
            CommunicatorCutReason()));
      }
    }
    if (!op_->done) {
      core_->unpaired.remove(op_);
      throw CommError(fmt::format(
          "[rank {}/{}] {} this rank itself ({}) timed out after {} ms: no {} "
          "of this rank {} it (post both before waiting for either)",
          rank_, size_, op_->send ? "isend to" : "irecv from", Describe(*op_),
          timeout.count(), op_->send ? "irecv" : "isend",
          op_->send ? "took" : "sent"));
    }
    if (op_->mismatch && !std::exchange(*op_->thrown, true)) {
      throw MismatchOfCalls(op_->error, slot_);
    }
  }

 private:
  std::shared_ptr<SelfMessages::Core> core_;
  std::shared_ptr<SelfMessages::Op> op_;
  const int rank_;
  const int size_;
  const int slot_;
};

}  // namespace

SelfMessages::SelfMessages(int rank, int size, int slot)
    : rank_(rank), size_(size), slot_(slot) {}

std::unique_ptr<RequestState> SelfMessages::Send(const void* data,
                                                 std::size_t count,
                                                 DataType type,
                                                 std::uint32_t tag) {
  return Post(true, data, nullptr, count, type, tag);
}

std::unique_ptr<RequestState> SelfMessages::Recv(void* data, std::size_t count,
                                                 DataType type,
                                                 std::uint32_t tag) {
  return Post(false, nullptr, data, count, type, tag);
}

std::unique_ptr<RequestState> SelfMessages::Post(bool send, const void* from,
                                                 void* to, std::size_t count,
                                                 DataType type,
                                                 std::uint32_t tag) {
  auto op = std::make_shared<Op>();
  op->send = send;
  op->from = from;
  op->to = to;
  op->count = count;
  op->type = type;
  op->tag = tag;
  {
    const std::lock_guard<std::mutex> lock(core_->mu);
    // The oldest unpaired one of the other kind with this tag.
    auto pair = std::find_if(core_->unpaired.begin(), core_->unpaired.end(),
                             [&](const auto& o) {
                               return o->send != op->send && o->tag == op->tag;
                             });
    if (pair == core_->unpaired.end()) {
      core_->unpaired.push_back(op);
    } else {
      Op& send = op->send ? *op : **pair;
      Op& recv = op->send ? **pair : *op;
      if (send.count != recv.count || send.type != recv.type) {
        const std::string error =
            fmt::format("[rank {}/{}] this rank sent itself {}; it expected {}",
                        rank_, size_, Describe(send), Describe(recv));
        auto thrown = std::make_shared<bool>(false);
        for (Op* o : {&send, &recv}) {
          o->mismatch = true;
          o->error = error;
          o->thrown = thrown;
        }
      } else if (send.count > 0) {
        std::memcpy(recv.to, send.from, send.count * SizeOf(send.type));
      }
      send.done = recv.done = true;
      core_->unpaired.erase(pair);
      core_->cv.notify_all();
    }
  }
  return std::make_unique<SelfRequest>(core_, std::move(op), rank_, size_,
                                       slot_);
}

}  // namespace disttest::internal
