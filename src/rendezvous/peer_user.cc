// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "rendezvous/peer_user.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace disttest::internal {
namespace {

// An address as /proc/net/tcp{,6} prints it: the address's 32-bit words
// as stored, in hex, then the port in host order ("0100007F:1F90").
std::string ProcAddress(const sockaddr_storage& a, bool* v6) {
  char text[64];
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    std::snprintf(text, sizeof text, "%08X:%04X", in.sin_addr.s_addr,
                  ntohs(in.sin_port));
    *v6 = false;
    return text;
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  std::uint32_t w[4];
  std::memcpy(w, &in6.sin6_addr, sizeof w);
  if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
    // An IPv4 client of a dual-stack listener: its socket is in tcp.
    std::snprintf(text, sizeof text, "%08X:%04X", w[3], ntohs(in6.sin6_port));
    *v6 = false;
    return text;
  }
  std::snprintf(text, sizeof text, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2],
                w[3], ntohs(in6.sin6_port));
  *v6 = true;
  return text;
}

bool IsLoopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      return in6.sin6_addr.s6_addr[12] == 127;
    }
  }
  return false;
}

}  // namespace

std::optional<uid_t> LocalPeerUid(int fd) {
  sockaddr_storage peer{}, self{};
  socklen_t peer_len = sizeof peer, self_len = sizeof self;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) != 0) {
    return std::nullopt;
  }
  bool v6 = false, self_v6 = false;
  // The peer's socket: its local address is our peer, its remote ours.
  const std::string local = ProcAddress(peer, &v6);
  const std::string remote = ProcAddress(self, &self_v6);
  std::FILE* f = std::fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
  if (f == nullptr) return std::nullopt;
  std::optional<uid_t> uid;
  char line[512];
  while (!uid && std::fgets(line, sizeof line, f) != nullptr) {
    char l[64], r[64];
    unsigned long owner = 0;
    // "  0: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000
    //  00000000  1000 ..."
    if (std::sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %lu", l, r, &owner) !=
        3) {
      continue;
    }
    if (local == l && remote == r) uid = static_cast<uid_t>(owner);
  }
  std::fclose(f);
  return uid;
}

bool LocalPeerMayConnect(int fd, long* uid) {
  if (uid != nullptr) *uid = -1;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
    return false;
  }
  const std::optional<uid_t> owner = LocalPeerUid(fd);
  if (!owner) return !IsLoopback(peer);  // Another host's, or unknown.
  if (uid != nullptr) *uid = static_cast<long>(*owner);
  return *owner == geteuid() || *owner == 0;
}

}  // namespace disttest::internal
