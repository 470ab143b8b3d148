// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "rendezvous/store_server_thread.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "disttest/error.h"

namespace disttest::internal {

StoreServerThread::StoreServerThread(const std::string& host, int port,
                                     std::string token)
    : server_(host, port, std::move(token)), wake_(eventfd(0, EFD_CLOEXEC)) {
  if (wake_ < 0) {
    throw Error(fmt::format("cannot create an eventfd for the store: {}",
                            std::strerror(errno)));
  }
  thread_ = std::thread([this] { Loop(); });
}

StoreServerThread::~StoreServerThread() {
  std::uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  thread_.join();
  close(wake_);
}

void StoreServerThread::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    server_.AppendPollFds(&fds);
    const std::size_t served = fds.size();
    fds.push_back({wake_, POLLIN, 0});
    // Until the next connection's deadline to present the token, if any.
    if (poll(fds.data(), fds.size(), server_.poll_timeout_ms()) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds.back().revents != 0) return;
    server_.HandlePollFds(fds.data(), served);
  }
}

}  // namespace disttest::internal
