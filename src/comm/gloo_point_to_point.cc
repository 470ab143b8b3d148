// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator's sends and receives, blocking and not (isend, irecv):
// through the host arena's mailbox or Gloo's unbound buffers, in slots of
// their own whose timeout says what would have paired the message.
#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "comm/gloo_communicator_impl.h"
#include "comm/host_arena.h"
#include "disttest/error.h"

namespace disttest {
namespace {

// Gloo's built-in collectives use slot prefixes 0x01..0x08; point-to-point
// messages get their own so that a user tag never matches a collective.
constexpr uint8_t kPointToPointSlotPrefix = 0x40;

// The slot of a message through Gloo: its tag (bits 0-31), and 24 bits of a
// hash of what it carries, its element type and count (bits 32-55), under
// the prefix. A receive that expects another type or count never pairs with
// it: Gloo would deliver 8 floats into a receive of 16 (the last 8 never
// written) or floats into ints, and both ranks would pass. Such a pair now
// waits, each side's timeout naming what it waited for. (The host arena
// compares the calls themselves and fails both at once.)
std::uint64_t PointToPointSlot(std::uint32_t tag, std::size_t count,
                               DataType type) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint64_t v :
       {static_cast<std::uint64_t>(count), static_cast<std::uint64_t>(type)}) {
    for (int byte = 0; byte < 8; ++byte) {
      h = (h ^ ((v >> (8 * byte)) & 0xff)) * 0x100000001b3ULL;
    }
  }
  const std::uint64_t shape = (h ^ (h >> 24) ^ (h >> 48)) & 0xffffffULL;
  return (std::uint64_t{kPointToPointSlotPrefix} << 56) | (shape << 32) | tag;
}

// What a message through Gloo that never paired says after Gloo's timeout:
// what its peer must have called for it to pair.
std::string Unpaired(bool send, int rank, std::size_t count, DataType type,
                     int peer, std::uint32_t tag) {
  return fmt::format(
      " (a message pairs only with a receive of the same tag, element type "
      "and count: did rank {} {} {} x {} {} rank {} with tag {}?)",
      peer, send ? "receive" : "send", count, Name(type), send ? "from" : "to",
      rank, tag);
}

// A send or receive through Gloo's sockets: its unbound buffer, waited for
// once.
// Waits for a message through Gloo; its timeout says what would pair it.
void WaitForMessage(gloo::transport::UnboundBuffer& buffer, bool send,
                    std::chrono::milliseconds timeout,
                    const std::string& unpaired) {
  bool done = false;
  try {
    done = send ? buffer.waitSend(nullptr, timeout)
                : buffer.waitRecv(nullptr, timeout);
  } catch (const ::gloo::IoException& e) {
    const std::string what = e.what();
    if (what.find("Timed out") == std::string::npos) throw;
    throw CommError(what + unpaired);
  }
  if (!done) throw CommError("aborted");
}

class GlooRequest : public RequestState {
 public:
  GlooRequest(std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool send,
              std::function<void(const std::function<void()>&)> guard,
              std::string unpaired)
      : buffer_(std::move(buffer)),
        send_(send),
        guard_(std::move(guard)),
        unpaired_(std::move(unpaired)) {}
  void Wait(std::chrono::milliseconds timeout) override {
    guard_([&] { WaitForMessage(*buffer_, send_, timeout, unpaired_); });
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  bool send_;
  std::function<void(const std::function<void()>&)> guard_;
  std::string unpaired_;
};

// One in the arena's mailbox.
class ArenaRequest : public RequestState {
 public:
  ArenaRequest(std::shared_ptr<HostArena> arena, int rank, std::uint64_t id,
               std::function<void(const std::function<void()>&)> guard)
      : arena_(std::move(arena)),
        rank_(rank),
        id_(id),
        guard_(std::move(guard)) {}
  // One never waited for (dropped: the test fails for it) is forgotten: no
  // later wait or collective of the rank moves it on, into a buffer that
  // may be gone.
  ~ArenaRequest() override { arena_->Forget(rank_, id_); }
  void Wait(std::chrono::milliseconds timeout) override {
    guard_([&] { arena_->WaitFor(rank_, id_, timeout); });
  }

 private:
  std::shared_ptr<HostArena> arena_;
  int rank_;
  std::uint64_t id_;
  std::function<void(const std::function<void()>&)> guard_;
};

}  // namespace

std::unique_ptr<RequestState> GlooCommunicator::DoISend(const void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  impl_->CheckPeer("isend", peer);
  const std::string what =
      fmt::format("{} to rank {} (tag {})",
                  impl_->Describe("isend", count, type), peer, tag);
  Impl* impl = impl_.get();
  auto guard = [impl, what](const std::function<void()>& op) {
    impl->Guard(what, op);
  };
  std::unique_ptr<RequestState> request;
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      request = std::make_unique<ArenaRequest>(
          impl_->arena, impl_->rank,
          impl_->arena->PostSend(impl_->rank, data, count, type, peer, tag),
          guard);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(const_cast<void*>(data),
                                                   count * SizeOf(type));
    buf->send(peer, PointToPointSlot(tag, count, type));
    request = std::make_unique<GlooRequest>(
        std::move(buf), true, guard,
        Unpaired(true, impl_->rank, count, type, peer, tag));
  });
  return request;
}

std::unique_ptr<RequestState> GlooCommunicator::DoIRecv(void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  impl_->CheckPeer("irecv", peer);
  const std::string what =
      fmt::format("{} from rank {} (tag {})",
                  impl_->Describe("irecv", count, type), peer, tag);
  Impl* impl = impl_.get();
  auto guard = [impl, what](const std::function<void()>& op) {
    impl->Guard(what, op);
  };
  std::unique_ptr<RequestState> request;
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      request = std::make_unique<ArenaRequest>(
          impl_->arena, impl_->rank,
          impl_->arena->PostRecv(impl_->rank, data, count, type, peer, tag),
          guard);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(data, count * SizeOf(type));
    buf->recv(peer, PointToPointSlot(tag, count, type));
    request = std::make_unique<GlooRequest>(
        std::move(buf), false, guard,
        Unpaired(false, impl_->rank, count, type, peer, tag));
  });
  return request;
}

void GlooCommunicator::DoSend(const void* data, std::size_t count,
                              DataType type, int peer, std::uint32_t tag) {
  impl_->CheckPeer("send", peer);
  std::string what =
      fmt::format("{} to rank {} (tag {})",
                  impl_->Describe("send", count, type), peer, tag);
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      impl_->arena->Send(impl_->rank, data, count, type, peer, tag,
                         impl_->timeout);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(const_cast<void*>(data),
                                                   count * SizeOf(type));
    buf->send(peer, PointToPointSlot(tag, count, type));
    WaitForMessage(*buf, true, impl_->timeout,
                   Unpaired(true, impl_->rank, count, type, peer, tag));
  });
}

void GlooCommunicator::DoRecv(void* data, std::size_t count, DataType type,
                              int peer, std::uint32_t tag) {
  impl_->CheckPeer("recv", peer);
  std::string what =
      fmt::format("{} from rank {} (tag {})",
                  impl_->Describe("recv", count, type), peer, tag);
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      impl_->arena->Recv(impl_->rank, data, count, type, peer, tag,
                         impl_->timeout);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(data, count * SizeOf(type));
    buf->recv(peer, PointToPointSlot(tag, count, type));
    WaitForMessage(*buf, false, impl_->timeout,
                   Unpaired(false, impl_->rank, count, type, peer, tag));
  });
}

}  // namespace disttest
