// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the store server does with each request of a connection
// (tcp_store_server.cc): the token's HELLO, the keys' SET, GET, ADD, CHECK,
// WAIT and DELETE, and the GETs and WAITs parked until their keys are set.
#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "rendezvous/tcp_store_server_connection.h"
#include "rendezvous/tcp_store_server_impl.h"
#include "rendezvous/wire.h"

namespace disttest {

using internal::FrameWriter;
using internal::Op;
using internal::Status;

namespace {

std::vector<char> OkReply() {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  return std::move(w).Finish();
}

std::vector<char> OkReplyU8(bool value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutU8(value ? 1 : 0);
  return std::move(w).Finish();
}

std::vector<char> OkReplyI64(int64_t value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutI64(value);
  return std::move(w).Finish();
}

std::vector<char> OkReplyBytes(const std::vector<char>& value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutBytes(value.data(), value.size());
  return std::move(w).Finish();
}

}  // namespace

void TcpStoreServer::Impl::HandleFrame(Connection& c, const char* data,
                                       std::size_t size) {
  internal::Request request;
  std::string error;
  if (!internal::DecodeRequest(data, size, &request, &error)) {
    // The client is not speaking this protocol; replying could confuse it
    // further, so it only sees its connection close.
    c.dead = true;
    return;
  }
  if (!c.authenticated) {
    // Unanswered, so that a stranger learns nothing but the closed socket.
    if (request.op != Op::kHello ||
        !internal::TokensEqual(token_, request.token)) {
      c.dead = true;
      return;
    }
    c.authenticated = true;
    if (unauthenticated_ > 0) --unauthenticated_;
    return;
  }
  switch (request.op) {
    case Op::kSet:
      HandleSet(c, std::move(request.key), std::move(request.value));
      break;
    case Op::kGet:
      Park(c, {std::move(request.key)}, /*wants_value=*/true);
      break;
    case Op::kAdd:
      HandleAdd(c, request.key, request.delta);
      break;
    case Op::kCheck: {
      bool all = true;
      for (const std::string& key : request.keys) all &= data_.count(key) > 0;
      Reply(c, OkReplyU8(all));
      break;
    }
    case Op::kWait:
      Park(c, std::move(request.keys), /*wants_value=*/false);
      break;
    case Op::kDelete:
      Reply(c, OkReplyU8(data_.erase(request.key) > 0));
      break;
    case Op::kHello:  // already served, or the server has no token
      break;
  }
}

void TcpStoreServer::Impl::HandleSet(Connection& c, std::string key,
                                     std::vector<char> value) {
  data_[key] = std::move(value);
  Reply(c, OkReply());
  WakeWaiters(key);
}

void TcpStoreServer::Impl::Set(const std::string& key,
                               std::vector<char> value) {
  data_[key] = std::move(value);
  WakeWaiters(key);
  ProcessReady();
}

void TcpStoreServer::Impl::HandleAdd(Connection& c, const std::string& key,
                                     int64_t delta) {
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    const char* begin = it->second.data();
    const char* end = begin + it->second.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || begin == end) {
      Reply(c,
            internal::EncodeErrorReply(fmt::format(
                "cannot add to key '{}': its value is not an integer", key)));
      return;
    }
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    Reply(c, internal::EncodeErrorReply(fmt::format(
                 "cannot add {} to key '{}': int64 overflow", delta, key)));
    return;
  }
  const std::string text = std::to_string(value);
  data_[key] = std::vector<char>(text.begin(), text.end());
  Reply(c, OkReplyI64(value));
  WakeWaiters(key);
}

void TcpStoreServer::Impl::Park(Connection& c, std::vector<std::string> keys,
                                bool wants_value) {
  c.parked = true;
  c.wants_value = wants_value;
  c.parked_keys = std::move(keys);
  c.next_key = 0;
  TryCompleteParked(c);
}

bool TcpStoreServer::Impl::TryCompleteParked(Connection& c) {
  // Resume where the last check stopped; the keys before next_key were
  // present then, and are checked again below only once all others are.
  for (bool rescanned = false;; rescanned = true) {
    for (; c.next_key < c.parked_keys.size(); ++c.next_key) {
      const std::string& key = c.parked_keys[c.next_key];
      if (data_.count(key) == 0) {
        c.waiting_on = key;
        waiters_[key].insert(c.fd);
        return false;
      }
    }
    if (rescanned || c.parked_keys.size() <= 1) break;
    c.next_key = 0;  // a key seen earlier may have been deleted since
  }
  c.parked = false;
  Reply(c, c.wants_value ? OkReplyBytes(data_[c.parked_keys[0]]) : OkReply());
  c.parked_keys.clear();
  return true;
}

void TcpStoreServer::Impl::WakeWaiters(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::set<int> fds = std::move(it->second);
  waiters_.erase(it);
  for (int fd : fds) {
    auto conn = connections_.find(fd);
    if (conn == connections_.end() || conn->second->dead) continue;
    Connection& c = *conn->second;
    if (TryCompleteParked(c)) ready_.push_back(fd);
  }
}

}  // namespace disttest
