// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStore: a client of the store over TCP (the server is
// tcp_store_server.h).
//
//   disttest::TcpStore client("127.0.0.1", port);
//   client.set("k", "v");
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

#include <chrono>
#include <cstdint>
#include <memory>
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

}  // namespace disttest

#endif  // DISTTEST_RENDEZVOUS_TCP_STORE_H_
