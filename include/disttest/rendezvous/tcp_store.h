// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStore (client) and TcpStoreServer: the store over TCP.
//
//   disttest::TcpStoreServer server("127.0.0.1", 0);    // kernel-picked port
//   // ... the owner drives it from its own poll loop (see below) ...
//   disttest::TcpStore client("127.0.0.1", server.port());
//   client.set("k", "v");
//
// The server is single-threaded and non-blocking: it owns a listening socket
// and one socket per client, and it is driven by its owner's poll loop through
// AppendPollFds()/HandlePollFds(), or by PollOnce(). It starts no thread, so a
// process that forks may host it. A forked child must not use the server
// object; it closes the server's descriptors (those AppendPollFds() lists,
// all close-on-exec for an exec'd child).
//
// Blocking requests (get, wait) are parked on the server until their keys are
// set; the client enforces its own deadline with poll() and never sleeps in a
// loop. A client whose deadline passes closes its connection (the server then
// forgets its parked requests) and reconnects on its next request.
//
// Connecting retries on ECONNREFUSED with exponential backoff until the
// client's timeout; then: "cannot connect to store at 127.0.0.1:1234 within
// 30000 ms: Connection refused".
//
// A per-run token keeps other users' processes on the same host out of the
// store: a server given a token closes, unanswered and unexecuted, every
// connection that does not open by presenting it.
//
//   std::string token = disttest::GenerateStoreToken();
//   disttest::TcpStoreServer server("127.0.0.1", 0, token);
//   disttest::TcpStore client("127.0.0.1", server.port(), 30s, token);
#ifndef DISTTEST_RENDEZVOUS_TCP_STORE_H_
#define DISTTEST_RENDEZVOUS_TCP_STORE_H_

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "disttest/rendezvous/store.h"

namespace disttest {

// Returns a fresh random store token: 32 lowercase hex characters (128 bits)
// from getrandom(2), or from /dev/urandom where getrandom is unavailable.
// Throws fmt::system_error "cannot read random bytes for the store token".
std::string GenerateStoreToken();

class TcpStore : public Store {
 public:
  // Connects lazily, on the first request. `timeout` bounds connecting and
  // every blocking request. A non-empty `token` is presented (HELLO) on
  // every new connection. A server that refuses the token closes the
  // connection at once, and the request fails with StoreError "store at
  // 127.0.0.1:1234 closed the connection during get of key 'k' (a wrong store
  // token closes it at once)". Throws StoreError when `token` is longer than
  // 1024 bytes.
  TcpStore(std::string host, int port,
           std::chrono::milliseconds timeout = Store::kDefaultTimeout,
           std::string token = "");
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  using Store::set;
  void set(std::string_view key, const std::vector<char>& value) override;
  std::vector<char> get(std::string_view key) override;
  int64_t add(std::string_view key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;
  bool remove(std::string_view key) override;

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Reply;
  Reply Call(const std::vector<char>& request, std::string_view what);
  void Connect(Clock::time_point deadline);
  int TryConnect(Clock::time_point deadline);
  void Disconnect();

  std::string host_;
  int port_;
  std::string endpoint_;     // "host:port" (IPv6: "[host]:port") for messages
  std::vector<char> hello_;  // the HELLO frame; empty without a token
  int fd_ = -1;
};

class TcpStoreServer {
 public:
  // Largest request or reply frame accepted (bytes). A larger frame closes
  // the offending connection; the server goes on.
  static constexpr std::size_t kMaxFrameBytes = 64u << 20;

  // Binds and listens on host:port (port 0: the kernel picks one). Throws
  // fmt::system_error "cannot bind store socket to 127.0.0.1:0". With a
  // non-empty `token`, a connection is served only once its first frame is a
  // HELLO carrying that token; any other connection is closed unanswered
  // before anything it sent is executed. Throws StoreError when `token` is
  // longer than 1024 bytes.
  TcpStoreServer(const std::string& host, int port, std::string token = "");
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

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

  std::string host_;
  std::string accept_trouble_;
  int port_ = 0;
  std::string token_;  // empty: every connection is served
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

#endif  // DISTTEST_RENDEZVOUS_TCP_STORE_H_
