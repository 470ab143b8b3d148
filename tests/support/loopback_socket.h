// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: a TCP socket on 127.0.0.1 and a port the kernel picked.
//
//   LoopbackSocket taken(/*listen=*/true);  // holds taken.port() while alive
//   int port = FreePort();                    // free a moment ago
#ifndef DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_
#define DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>

namespace disttest::testing {

class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listen = false)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        (listen && ::listen(fd_, 1) != 0) ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot bind a socket to 127.0.0.1:0";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~LoopbackSocket() {
    if (fd_ >= 0) close(fd_);
  }
  LoopbackSocket(const LoopbackSocket&) = delete;
  LoopbackSocket& operator=(const LoopbackSocket&) = delete;

  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// Whether 127.0.0.1:`port` could be bound just now.
inline bool PortIsFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound =
      fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) close(fd);
  return bound;
}

// A port that was free a moment ago, below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): no connect() or bind(0) of
// another process is handed it meanwhile, only an explicit bind could race.
// With `from` and `to`, one in [from, to) (and below that range).
inline int FreePort(int from = 10000, int to = 65536) {
  int low = 32768, high = 60999;
  if (std::FILE* f =
          std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  const int end = std::min(to, low);
  std::minstd_rand random(static_cast<unsigned>(
      getpid() ^ std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; end - from > 1000 && attempt < 100; ++attempt) {
    const int port = from + static_cast<int>(random() % (end - from));
    if (PortIsFree(port)) return port;
  }
  if (from == 10000 && to == 65536) return LoopbackSocket().port();
  ADD_FAILURE() << "no free port in [" << from << ", " << end << ")";
  return from;
}

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_
