// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStoreServer: a single-threaded, non-blocking key-value server. Each
// connection has an input buffer parsed frame by frame and an output buffer
// flushed as the socket accepts it. A connection whose request cannot be
// answered yet (GET of a missing key, WAIT) is parked: later requests of that
// connection stay buffered until a SET or ADD completes it, so requests are
// answered in order. Connections are closed only at the end of a round
// (ReapClosed), so no handler ever sees a connection vanish under it.
//
// A server without a token serves only its own user (and root) on this
// host (peer_user.h); one with a token serves a connection only once its
// first frame is a HELLO with that token. Until then the connection may send no
// frame larger than a HELLO; any other first frame marks it dead, which stops
// the processing of everything buffered behind it.
//
// Here: the connection loop (polling, reading, writing, closing). Who is let
// in: tcp_store_server_admission.cc; what each request does to the keys:
// tcp_store_server_requests.cc.
#include "disttest/rendezvous/tcp_store_server.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/retry.h"
#include "disttest/error.h"
#include "rendezvous/bind.h"
#include "rendezvous/tcp_store_server_connection.h"
#include "rendezvous/tcp_store_server_impl.h"
#include "rendezvous/wire.h"

namespace disttest {

namespace {

constexpr std::size_t kReadChunkBytes = 64 << 10;
// Buffers that grew for a large value are released once idle above this.
constexpr std::size_t kKeepCapacityBytes = 1 << 20;

void ReleaseIfLarge(std::vector<char>& buffer) {
  if (buffer.empty() && buffer.capacity() > kKeepCapacityBytes) {
    std::vector<char>().swap(buffer);
  }
}

}  // namespace

TcpStoreServer::Impl::Impl(const std::string& host, int port, std::string token)
    : host_(host), token_(std::move(token)) {
  if (token_.size() > internal::kMaxTokenBytes) {
    throw StoreError(
        fmt::format("store token of {} bytes exceeds the limit of {} bytes",
                    token_.size(), internal::kMaxTokenBytes));
  }
  auto [bound, bound_port] = internal::BindTcp(host, port, SOCK_NONBLOCK);
  internal::FdGuard fd(bound);
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    throw fmt::system_error(errno, "cannot listen on store socket {}:{}", host,
                            port);
  }
  port_ = bound_port;
  listen_fd_ = fd.release();
}

TcpStoreServer::Impl::~Impl() {
  for (auto& [fd, connection] : connections_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void TcpStoreServer::Impl::AppendPollFds(std::vector<pollfd>* fds) const {
  // While accepting is paused (MakeRoomForHello), no events: listed still,
  // so that owners close it in the processes they fork.
  // (Over once some of them presented the token: there is room.)
  const bool paused = unauthenticated_ >= TcpStoreServer::kMaxUnauthenticated &&
                      std::chrono::steady_clock::now() < accept_paused_until_;
  fds->push_back(
      pollfd{listen_fd_, static_cast<short>(paused ? 0 : POLLIN), 0});
  for (const auto& [fd, c] : connections_) {
    short events = POLLIN;
    if (c->pending_output() > 0) events |= POLLOUT;
    fds->push_back(pollfd{fd, events, 0});
  }
}

void TcpStoreServer::Impl::HandlePollFds(const pollfd* fds, std::size_t count) {
  bool listen_ready = false;
  for (std::size_t i = 0; i < count; ++i) {
    const pollfd& p = fds[i];
    if (p.revents == 0) continue;
    if (p.fd == listen_fd_) {
      listen_ready = true;
      continue;
    }
    auto it = connections_.find(p.fd);
    if (it == connections_.end() || it->second->dead) continue;
    Connection& c = *it->second;
    if (p.revents & POLLNVAL) c.dead = true;
    if (!c.dead && (p.revents & POLLOUT)) OnWritable(c);
    // POLLHUP and POLLERR are handled by the read, which reports them.
    if (!c.dead && (p.revents & (POLLIN | POLLHUP | POLLERR))) OnReadable(c);
  }
  // New connections after the known ones were read: one that presented the
  // token is no longer among those waiting to (MakeRoomForHello).
  if (listen_ready) Accept();
  ProcessReady();
}

void TcpStoreServer::Impl::ProcessReady() {
  while (!ready_.empty()) {
    int fd = ready_.back();
    ready_.pop_back();
    auto it = connections_.find(fd);
    if (it != connections_.end() && !it->second->dead) {
      ProcessInput(*it->second);
    }
  }
  ReapClosed();
}

void TcpStoreServer::Impl::PollOnce(int timeout_ms) {
  std::vector<pollfd> fds;
  AppendPollFds(&fds);
  int n = internal::RetryOnEintr(
      [&] { return ::poll(fds.data(), fds.size(), timeout_ms); });
  if (n < 0) throw fmt::system_error(errno, "cannot poll store sockets");
  HandlePollFds(fds.data(), fds.size());  // Deadlines pass without events.
}

void TcpStoreServer::Impl::OnReadable(Connection& c) {
  for (;;) {
    const std::size_t old_size = c.in.size();
    c.in.resize(old_size + kReadChunkBytes);
    const ssize_t n = ::recv(c.fd, c.in.data() + old_size, kReadChunkBytes, 0);
    const int error = errno;
    c.in.resize(old_size + (n > 0 ? n : 0));
    if (n < 0 && error == EINTR) continue;
    if (n < 0 && (error == EAGAIN || error == EWOULDBLOCK)) return;
    if (n <= 0) {  // EOF or reset: forget the connection and what it parked
      c.dead = true;
      return;
    }
    ProcessInput(c);
    if (c.dead) return;
    // A blocked connection may buffer one maximal frame in advance; a
    // well-behaved client never sends more than that before its reply.
    if (c.in.size() - c.in_pos >
        internal::kFrameHeaderBytes + internal::kMaxFrameBytes) {
      c.dead = true;
      return;
    }
  }
}

void TcpStoreServer::Impl::OnWritable(Connection& c) {
  const bool was_blocked = c.blocked();
  Flush(c);
  if (!c.dead && was_blocked && !c.blocked()) ProcessInput(c);
}

void TcpStoreServer::Impl::ProcessInput(Connection& c) {
  while (!c.dead && !c.blocked()) {
    const std::size_t available = c.in.size() - c.in_pos;
    if (available < internal::kFrameHeaderBytes) break;
    const char* frame = c.in.data() + c.in_pos;
    const std::size_t length = internal::DecodeFrameLength(frame);
    const std::size_t limit =
        c.authenticated ? internal::kMaxFrameBytes : internal::kMaxHelloBytes;
    if (length > limit) {
      c.dead = true;
      return;
    }
    if (available < internal::kFrameHeaderBytes + length) break;
    c.in_pos += internal::kFrameHeaderBytes + length;
    HandleFrame(c, frame + internal::kFrameHeaderBytes, length);
  }
  // Compact so the buffer holds at most the unprocessed tail.
  c.in.erase(c.in.begin(), c.in.begin() + c.in_pos);
  c.in_pos = 0;
  ReleaseIfLarge(c.in);
}

void TcpStoreServer::Impl::Reply(Connection& c, std::vector<char> frame) {
  if (c.pending_output() == 0) {
    c.out = std::move(frame);
    c.out_pos = 0;
  } else {
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
  Flush(c);
}

void TcpStoreServer::Impl::Flush(Connection& c) {
  while (c.pending_output() > 0) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.pending_output(),
                       MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {  // the peer is gone (EPIPE, ECONNRESET)
      c.dead = true;
      return;
    }
    c.out_pos += n;
  }
  c.out.clear();
  c.out_pos = 0;
  ReleaseIfLarge(c.out);
}

void TcpStoreServer::Impl::ReapClosed() {
  CloseLateHellos();
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& c = *it->second;
    if (!c.dead) {
      ++it;
      continue;
    }
    if (!c.authenticated && unauthenticated_ > 0) --unauthenticated_;
    // A parked connection is registered under waiting_on (possibly "").
    auto waiting = c.parked ? waiters_.find(c.waiting_on) : waiters_.end();
    if (waiting != waiters_.end()) {
      waiting->second.erase(c.fd);
      if (waiting->second.empty()) waiters_.erase(waiting);
    }
    ::close(c.fd);
    it = connections_.erase(it);
  }
}

TcpStoreServer::TcpStoreServer(const std::string& host, int port,
                               std::string token)
    : impl_(std::make_unique<Impl>(host, port, std::move(token))) {}
TcpStoreServer::~TcpStoreServer() = default;
const std::string& TcpStoreServer::host() const { return impl_->host(); }
int TcpStoreServer::port() const { return impl_->port(); }
const std::string& TcpStoreServer::accept_trouble() const {
  return impl_->accept_trouble();
}
int TcpStoreServer::listen_fd() const { return impl_->listen_fd(); }
void TcpStoreServer::AppendPollFds(std::vector<pollfd>* fds) const {
  impl_->AppendPollFds(fds);
}
void TcpStoreServer::HandlePollFds(const pollfd* fds, std::size_t count) {
  impl_->HandlePollFds(fds, count);
}
void TcpStoreServer::PollOnce(int timeout_ms) { impl_->PollOnce(timeout_ms); }
void TcpStoreServer::set_hello_deadline(std::chrono::milliseconds deadline) {
  impl_->set_hello_deadline(deadline);
}
int TcpStoreServer::poll_timeout_ms() const { return impl_->poll_timeout_ms(); }
const std::string& TcpStoreServer::flood() const { return impl_->flood(); }
void TcpStoreServer::Set(const std::string& key, std::vector<char> value) {
  impl_->Set(key, std::move(value));
}
std::size_t TcpStoreServer::waiting_on(const std::string& key) const {
  return impl_->waiting_on(key);
}
std::size_t TcpStoreServer::connection_count() const {
  return impl_->connection_count();
}

}  // namespace disttest
