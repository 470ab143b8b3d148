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

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

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
// With `from` and `to`, one in [from, to), wherever the ephemeral range is.
inline int FreePort(int from = 10000, int to = 0) {
  const bool below_ephemeral = to == 0;
  if (below_ephemeral) {
    int low = 32768, high = 60999;
    if (std::FILE* f =
            std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
      if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
      std::fclose(f);
    }
    to = low > from + 1000 ? low : from;  // Too few there: bind(0)'s.
  }
  std::minstd_rand random(static_cast<unsigned>(
      getpid() ^ std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; to > from && attempt < 100; ++attempt) {
    const int port = from + static_cast<int>(random() % (to - from));
    if (PortIsFree(port)) return port;
  }
  if (below_ephemeral) return LoopbackSocket().port();
  ADD_FAILURE() << "no free port in [" << from << ", " << to << ")";
  return from;
}

// What tests/launched/local-launcher.sh needs so that the job's store takes
// a port that was free a moment ago, not one at random, which a launched
// test running beside this one (ctest -j) might take too: MASTER_PORT
// (torchrun's variables), or, for Slurm's variables ("slurm"), a job id
// whose last 4 digits make it (the store listens on 15000 + those).
inline std::pair<std::string, std::string> LauncherPort(
    const std::string& style) {
  if (style == "slurm") {
    return {"JOB_ID", std::to_string(100000 + FreePort(15000, 25000) - 15000)};
  }
  return {"MASTER_PORT", std::to_string(FreePort())};
}

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_SUPPORT_LOOPBACK_SOCKET_H_
