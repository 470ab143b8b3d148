// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "rendezvous/bind.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "disttest/error.h"

namespace disttest::internal {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr ResolveListenAddress(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                       &hints, &result);
  if (rc != 0) {
    throw StoreError(fmt::format("cannot resolve store address {}:{}: {}", host,
                                 port, gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw fmt::system_error(errno, "cannot get store socket address");
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

std::pair<int, int> BindTcp(const std::string& host, int port, int type_flags) {
  AddrInfoPtr ai = ResolveListenAddress(host, port);
  FdGuard fd(::socket(ai->ai_family,
                      ai->ai_socktype | type_flags | SOCK_CLOEXEC,
                      ai->ai_protocol));
  if (fd.get() < 0) {
    throw fmt::system_error(errno, "cannot create store socket");
  }
  // Lets a restarted harness rebind a port that still has TIME_WAIT entries,
  // and code under test bind a port the harness holds but does not listen on.
  int one = 1;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    throw fmt::system_error(errno, "cannot set SO_REUSEADDR on store socket");
  }
  if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    throw fmt::system_error(errno, "cannot bind store socket to {}:{}", host,
                            port);
  }
  const int bound_port = LocalPort(fd.get());
  return {fd.release(), bound_port};
}

}  // namespace disttest::internal
