// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: a TCP socket on 127.0.0.1 and a port the kernel picked.
//
//   LoopbackSocket taken(/*listen=*/true);   // holds taken.port() until it
//   goes int port = FreePort();                   // free a moment ago
#ifndef DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_
#define DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A port that was free a moment ago; whoever binds it next may race another
// process for it.
inline int FreePort() { return LoopbackSocket().port(); }

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_
