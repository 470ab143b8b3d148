// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStoreServer: the server of the store over TCP (the client is
// tcp_store.h).
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
// With a token (GenerateStoreToken(), tcp_store.h) it serves only the
// connections that open by presenting it.
#ifndef DISTTEST_RENDEZVOUS_TCP_STORE_SERVER_H_
#define DISTTEST_RENDEZVOUS_TCP_STORE_SERVER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

struct pollfd;  // <poll.h>

namespace disttest {

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

  const std::string& host() const;
  int port() const;
  // Why a connection could not be accepted, once that happened because
  // this process is out of descriptors (it stays in the backlog,
  // and the peer waits): "cannot accept a store connection: Too many open
  // files". Empty otherwise.
  const std::string& accept_trouble() const;
  int listen_fd() const;

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

  // A connection of a server with a token that has not presented it after
  // this long is closed, and at most this many may wait to present it at
  // once (beyond them, the oldest is closed once it has sent nothing for a
  // fifth of the deadline; until then new connections wait in the kernel's
  // backlog): a flood of idle connections (from another user of the host,
  // or another host) cannot run the serving process out of descriptors.
  // Ranks present the token with their first frame, right after connecting.
  static constexpr int kDefaultHelloDeadlineMs = 10000;
  static constexpr std::size_t kMaxUnauthenticated = 128;
  void set_hello_deadline(std::chrono::milliseconds deadline);
  // How long the owner's poll may wait before the server needs a round (the
  // next connection's deadline to present the token); -1: no limit.
  int poll_timeout_ms() const;
  // "" or, once connections were closed for not presenting the token in
  // time or for coming beyond the limit: "the store closed 300 connections
  // that did not present its token within 10000 ms or came beyond the 128
  // that may wait at once (the first from uid 65534): another process
  // floods it".
  const std::string& flood() const;

  // Number of clients blocked in a get or wait for `key`.
  std::size_t waiting_on(const std::string& key) const;
  // Number of open client connections (for tests and diagnostics).
  std::size_t connection_count() const;

 private:
  class Impl;  // rendezvous/tcp_store_server_impl.h
  std::unique_ptr<Impl> impl_;
};

}  // namespace disttest

#endif  // DISTTEST_RENDEZVOUS_TCP_STORE_SERVER_H_
