// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStoreServer's state (tcp_store_server.h): its sockets, the keys, the
// connections parked on them. Only tcp_store_server*.cc use it.
#ifndef DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_IMPL_H_
#define DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_IMPL_H_

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "disttest/rendezvous/tcp_store_server.h"

namespace disttest {

class TcpStoreServer::Impl {
 public:
  Impl(const std::string& host, int port, std::string token);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // Why a connection could not be accepted, once that happened because
  // this process is out of descriptors (it stays in the backlog,
  // and the peer waits): "cannot accept a store connection: Too many open
  // files". Empty otherwise.
  const std::string& accept_trouble() const { return accept_trouble_; }
  int listen_fd() const { return listen_fd_; }

  // Appends one pollfd per socket the server needs watched.
  void AppendPollFds(std::vector<pollfd>* fds) const;
  // Handles whatever `fds` (a sub-range produced by AppendPollFds, with
  // revents filled in by poll) reports ready.
  void HandlePollFds(const pollfd* fds, std::size_t count);
  // Polls the server's own sockets once, waiting at most `timeout_ms`.
  void PollOnce(int timeout_ms);

  // Sets a key from the serving process itself, as a client's set would:
  // clients waiting for it are answered (their replies go out as the
  // sockets allow, on the next polls).
  void Set(const std::string& key, std::vector<char> value);

  // Number of clients blocked in a get or wait for `key`.
  std::size_t waiting_on(const std::string& key) const {
    auto it = waiters_.find(key);
    return it == waiters_.end() ? 0 : it->second.size();
  }

  // Number of open client connections (for tests and diagnostics).
  std::size_t connection_count() const { return connections_.size(); }

  void set_hello_deadline(std::chrono::milliseconds d) { hello_deadline_ = d; }
  int poll_timeout_ms() const;
  const std::string& flood() const { return flood_; }

 private:
  struct Connection;
  void Accept();
  void OnReadable(Connection& c);
  void OnWritable(Connection& c);
  void ProcessInput(Connection& c);
  void HandleFrame(Connection& c, const char* data, std::size_t size);
  void HandleSet(Connection& c, std::string key, std::vector<char> value);
  void HandleAdd(Connection& c, const std::string& key, int64_t delta);
  void Park(Connection& c, std::vector<std::string> keys, bool wants_value);
  void Reply(Connection& c, std::vector<char> frame);
  void Flush(Connection& c);
  void WakeWaiters(const std::string& key);
  bool TryCompleteParked(Connection& c);
  // Serves the connections that wake-ups unparked, then drops dead ones.
  void ProcessReady();
  void ReapClosed();
  // Closes the connections that did not present the token in time.
  void CloseLateHellos();
  // Whether one more connection may wait to present the token: below
  // kMaxUnauthenticated, or once the oldest waiting one, idle, is closed.
  // False (accepting pauses) while every waiting one is young.
  bool MakeRoomForHello();
  // Notes `c`, closed unauthenticated, for flood().
  void NoteFlood(Connection& c);

  std::string host_;
  std::string accept_trouble_;
  int port_ = 0;
  std::string token_;  // empty: every connection of this user is served
  bool refused_stranger_ = false;  // Said once.
  std::chrono::milliseconds hello_deadline_{
      TcpStoreServer::kDefaultHelloDeadlineMs};
  std::size_t unauthenticated_ = 0;  // connections still to present it
  std::chrono::steady_clock::time_point accept_paused_until_{};
  std::size_t flood_closed_ = 0;
  long flood_uid_ = -2;  // -2: not looked up yet; -1: cannot be told
  std::string flood_;
  int listen_fd_ = -1;
  std::map<int, std::unique_ptr<Connection>> connections_;
  std::map<std::string, std::vector<char>> data_;
  // key -> fds parked on it. A parked connection is registered under one
  // key only, the first of its keys found missing.
  std::map<std::string, std::set<int>> waiters_;
  // Connections unparked during this round whose buffered requests are still
  // to be processed (deferred so that wake-ups never recurse).
  std::vector<int> ready_;
};

}  // namespace disttest

#endif  // DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_IMPL_H_
