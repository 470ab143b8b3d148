// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Who the store server lets in (tcp_store_server.cc): accepting connections,
// refusing other users when it has no token, and closing those that do not
// present its token in time, or flood it.
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "rendezvous/peer_user.h"
#include "rendezvous/tcp_store_server_connection.h"
#include "rendezvous/tcp_store_server_impl.h"

namespace disttest {

void TcpStoreServer::Impl::Accept() {
  // At most half the connections that may wait for their token are taken in
  // one round; the rest stay in the backlog until the next, after these
  // were read.
  for (std::size_t accepted = 0;
       accepted < TcpStoreServer::kMaxUnauthenticated / 2; ++accepted) {
    // Full of connections too young to call idle: the next ones wait in the
    // kernel's backlog (the listening socket is not polled meanwhile).
    if (!token_.empty() && !MakeRoomForHello()) return;
    int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      switch (errno) {
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
          continue;
        // Out of fds or memory: leave the connection in the backlog and
        // retry on the next round rather than bring the harness down.
        case EAGAIN:
        case ENOBUFS:
        case ENOMEM:
          return;  // Passing: the next round retries.
        case EMFILE:
        case ENFILE:
          if (accept_trouble_.empty()) {
            accept_trouble_ = fmt::format(
                "cannot accept a store connection: {}", std::strerror(errno));
          }
          return;
        default:
          throw fmt::system_error(errno, "cannot accept store connection");
      }
    }
    // Without a token, another user of this host may not connect: it
    // could read any key, or set a rank's verdict.
    long uid = -1;
    if (token_.empty() && !internal::LocalPeerMayConnect(fd, &uid)) {
      ::close(fd);
      if (!refused_stranger_) {
        refused_stranger_ = true;
        std::fprintf(stderr,
                     "disttest: the store refused a connection from %s on "
                     "this host: a store without a token serves only its "
                     "own user (uid %d) and root\n",
                     uid >= 0 ? fmt::format("uid {}", uid).c_str()
                              : "a process whose user cannot be told",
                     static_cast<int>(geteuid()));
        std::fflush(stderr);
      }
      continue;
    }
    // Replies are small and latency-bound; Nagle would delay them.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!token_.empty()) ++unauthenticated_;
    connections_[fd] = std::make_unique<Connection>(fd, token_.empty());
  }
}

bool TcpStoreServer::Impl::MakeRoomForHello() {
  if (unauthenticated_ < TcpStoreServer::kMaxUnauthenticated) return true;
  Connection* oldest = nullptr;
  std::size_t waiting = 0;
  for (auto& [fd, c] : connections_) {
    if (c->authenticated || c->dead) continue;
    ++waiting;
    if (oldest == nullptr || c->accepted_at < oldest->accepted_at) {
      oldest = c.get();
    }
  }
  if (oldest == nullptr || waiting < TcpStoreServer::kMaxUnauthenticated) {
    return true;
  }
  // A rank presents the token with its first frame, right after it
  // connects: one that has sent nothing for a while (a fifth of the
  // deadline) is idle. A younger one may be a rank the scheduler has not
  // run yet (256 ranks starting on 2 cores): it is never closed for room.
  const auto idle_after = oldest->accepted_at + hello_deadline_ / 5;
  if (std::chrono::steady_clock::now() < idle_after) {
    accept_paused_until_ = idle_after;
    return false;
  }
  oldest->dead = true;
  NoteFlood(*oldest);
  return true;
}

void TcpStoreServer::Impl::CloseLateHellos() {
  if (unauthenticated_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [fd, c] : connections_) {
    if (c->authenticated || c->dead) continue;
    if (now - c->accepted_at >= hello_deadline_) {
      c->dead = true;
      NoteFlood(*c);
    }
  }
}

void TcpStoreServer::Impl::NoteFlood(Connection& c) {
  if (flood_uid_ == -2) {
    // Looked up once: /proc/net/tcp lists every socket of the host.
    flood_uid_ = -1;
    internal::LocalPeerMayConnect(c.fd, &flood_uid_);
  }
  ++flood_closed_;
  flood_ = fmt::format(
      "the store closed {} connection{} that did not present its token "
      "within {} ms or came beyond the {} that may wait at once (the first "
      "from {}): another process floods it",
      flood_closed_, flood_closed_ == 1 ? "" : "s", hello_deadline_.count(),
      TcpStoreServer::kMaxUnauthenticated,
      flood_uid_ >= 0 ? fmt::format("uid {}", flood_uid_)
                      : std::string("a peer whose user cannot be told"));
  if (flood_closed_ == 1) {
    std::fprintf(stderr, "disttest: %s:%d: %s\n", host_.c_str(), port_,
                 flood_.c_str());
    std::fflush(stderr);
  }
}

int TcpStoreServer::Impl::poll_timeout_ms() const {
  if (unauthenticated_ == 0) return -1;
  auto first = std::chrono::steady_clock::time_point::max();
  for (const auto& [fd, c] : connections_) {
    if (!c->authenticated && !c->dead) first = std::min(first, c->accepted_at);
  }
  if (first == std::chrono::steady_clock::time_point::max()) return -1;
  // The next deadline, or the end of a pause in accepting.
  auto next = first + hello_deadline_;
  const auto now = std::chrono::steady_clock::now();
  if (accept_paused_until_ > now) next = std::min(next, accept_paused_until_);
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
  return static_cast<int>(std::max<long long>(left.count(), 0) + 1);
}

}  // namespace disttest
