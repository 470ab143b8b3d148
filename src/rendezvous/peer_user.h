// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Who is at the other end of a TCP connection on this host: the user id of
// the process whose socket it is, read from /proc/net/tcp and tcp6 (the
// kernel lists every socket of this network namespace with its owner's
// uid). A store without a token (a launched run's) serves only its own
// user (and root) on this host: loopback is open to every user of the
// machine, and a stranger's SET could otherwise decide a rank's verdict.
//
//   if (!internal::LocalPeerMayConnect(fd)) ::close(fd);
#ifndef DISTTEST_SRC_RENDEZVOUS_PEER_USER_H_
#define DISTTEST_SRC_RENDEZVOUS_PEER_USER_H_

#include <sys/types.h>

#include <optional>

namespace disttest::internal {

// The uid of the local socket connected to `fd` (an accepted connection);
// nullopt when none of this host's is (the peer is on another host) or the
// tables cannot be read.
std::optional<uid_t> LocalPeerUid(int fd);

// Whether the peer of accepted connection `fd` may use a store without a
// token: a process of this user or root on this host, or a peer on
// another host (a token or the network decides there). A loopback peer
// that cannot be told is refused. `uid`, when given, gets the peer's uid
// (-1 when it is not known).
bool LocalPeerMayConnect(int fd, long* uid = nullptr);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_PEER_USER_H_
