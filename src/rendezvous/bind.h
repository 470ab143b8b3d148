// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A TCP socket bound to host:port with SO_REUSEADDR (port 0: the kernel
// picks one), for the store server, which then listens on it, and for the
// MASTER_PORT the harness reserves for the code under test, which it never
// listens on.
//
//   auto [fd, port] = disttest::internal::BindTcp("127.0.0.1", 0, 0);
#ifndef DISTTEST_SRC_RENDEZVOUS_BIND_H_
#define DISTTEST_SRC_RENDEZVOUS_BIND_H_

#include <unistd.h>

#include <string>
#include <utility>

namespace disttest::internal {

// Owns an fd until released; closes it if construction throws half-way.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Returns {descriptor, bound port}; the descriptor is close-on-exec, and
// `type_flags` (SOCK_NONBLOCK) are added to its type. Throws StoreError when
// host does not resolve and fmt::system_error when a call fails.
std::pair<int, int> BindTcp(const std::string& host, int port, int type_flags);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_BIND_H_
