// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// This process's TCP sockets, found through /proc/self/fd, by inode: which a
// rank inherited, which a communicator opened, and their ports.
//
//   std::map<ino_t, int> before = TcpSockets();
//   ... connect ...
//   for (auto [inode, fd] : NewSince(before)) PortOf(fd, /*peer=*/true);
#ifndef DISTTEST_SRC_BASE_SOCKETS_H_
#define DISTTEST_SRC_BASE_SOCKETS_H_

#include <sys/types.h>

#include <map>
#include <vector>

namespace disttest::internal {

// This process's TCP sockets (IPv4 and IPv6): inode -> descriptor.
std::map<ino_t, int> TcpSockets();
// The same, among descriptors already listed (OpenDescriptors()).
std::map<ino_t, int> TcpSockets(const std::vector<int>& fds);

// The TCP sockets opened since `before` was taken.
std::map<ino_t, int> NewSince(const std::map<ino_t, int>& before);

// Socket `fd`'s local (or, with `peer`, remote) port; -1 when unknown.
int PortOf(int fd, bool peer);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_SOCKETS_H_
