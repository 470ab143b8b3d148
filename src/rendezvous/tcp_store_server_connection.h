// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// One client connection of the store server (tcp_store_server_impl.h): its
// buffers and the request it has parked, shared by the connection loop, the
// admission of new connections and the handling of requests.
#ifndef DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_CONNECTION_H_
#define DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_CONNECTION_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "rendezvous/tcp_store_server_impl.h"

namespace disttest {

struct TcpStoreServer::Impl::Connection {
  Connection(int fd, bool authenticated)
      : fd(fd),
        authenticated(authenticated),
        accepted_at(std::chrono::steady_clock::now()) {}

  // Above this much unsent output the server stops taking requests from the
  // connection, so a client that never reads cannot make the server buffer
  // without bound.
  static constexpr std::size_t kOutputHighWater = 4 << 20;

  std::size_t pending_output() const { return out.size() - out_pos; }
  // True while the connection must not start its next request.
  bool blocked() const { return parked || pending_output() > kOutputHighWater; }

  int fd;
  bool dead = false;   // closed by ReapClosed() at the end of the round
  bool authenticated;  // it presented the token, or the server has none
  std::chrono::steady_clock::time_point accepted_at;
  std::vector<char> in;
  std::size_t in_pos = 0;  // start of the first unprocessed byte of `in`
  std::vector<char> out;
  std::size_t out_pos = 0;  // start of the first unsent byte of `out`
  // The parked GET (one key, wants_value) or WAIT.
  bool parked = false;
  bool wants_value = false;
  std::vector<std::string> parked_keys;
  std::size_t next_key = 0;  // keys before it were present when last checked
  std::string waiting_on;    // while parked: the key waiters_ holds it under
};

}  // namespace disttest

#endif  // DISTTEST_SRC_RENDEZVOUS_TCP_STORE_SERVER_CONNECTION_H_
