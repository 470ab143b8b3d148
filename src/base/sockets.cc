// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/sockets.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <vector>

#include "base/descriptors.h"
#include "base/unordered_reads.h"

namespace disttest::internal {

std::map<ino_t, int> TcpSockets() {
  return TcpSockets(OpenDescriptors().value_or(std::vector<int>{}));
}

std::map<ino_t, int> TcpSockets(const std::vector<int>& fds) {
  // Every descriptor of the process, whoever's: another thread (a store's
  // server) may accept or close one meanwhile, unordered with this look
  // (which ThreadSanitizer would call a race on the descriptor).
  const UnorderedReads scan;
  std::map<ino_t, int> sockets;
  for (int fd : fds) {
    int type = 0;
    socklen_t len = sizeof type;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    struct stat st {};
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 ||
        (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) ||
        fstat(fd, &st) != 0) {
      continue;
    }
    sockets.emplace(st.st_ino, fd);
  }
  return sockets;
}

std::map<ino_t, int> NewSince(const std::map<ino_t, int>& before) {
  std::map<ino_t, int> fresh;
  for (const auto& [inode, fd] : TcpSockets()) {
    if (before.count(inode) == 0) fresh.emplace(inode, fd);
  }
  return fresh;
}

int PortOf(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return -1;
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

}  // namespace disttest::internal
