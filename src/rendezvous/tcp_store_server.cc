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
#include "disttest/rendezvous/tcp_store_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/retry.h"
#include "disttest/error.h"
#include "rendezvous/bind.h"
#include "rendezvous/peer_user.h"
#include "rendezvous/tcp_store_server_impl.h"
#include "rendezvous/wire.h"

namespace disttest {

using internal::FrameWriter;
using internal::Op;
using internal::Status;

namespace {

constexpr std::size_t kReadChunkBytes = 64 << 10;
// Above this much unsent output the server stops taking requests from the
// connection, so a client that never reads cannot make the server buffer
// without bound.
constexpr std::size_t kOutputHighWater = 4 << 20;
// Buffers that grew for a large value are released once idle above this.
constexpr std::size_t kKeepCapacityBytes = 1 << 20;

std::vector<char> OkReply() {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  return std::move(w).Finish();
}

std::vector<char> OkReplyU8(bool value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutU8(value ? 1 : 0);
  return std::move(w).Finish();
}

std::vector<char> OkReplyI64(int64_t value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutI64(value);
  return std::move(w).Finish();
}

std::vector<char> OkReplyBytes(const std::vector<char>& value) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kOk));
  w.PutBytes(value.data(), value.size());
  return std::move(w).Finish();
}

void ReleaseIfLarge(std::vector<char>& buffer) {
  if (buffer.empty() && buffer.capacity() > kKeepCapacityBytes) {
    std::vector<char>().swap(buffer);
  }
}

}  // namespace

struct TcpStoreServer::Impl::Connection {
  Connection(int fd, bool authenticated)
      : fd(fd),
        authenticated(authenticated),
        accepted_at(std::chrono::steady_clock::now()) {}

  std::size_t pending_output() const { return out.size() - out_pos; }
  // True while the connection must not start its next request.
  bool blocked() const { return parked || pending_output() > kOutputHighWater; }

  int fd;
  bool dead = false;   // closed by ReapClosed() at the end of the round
  bool authenticated;  // it presented the token, or the server has none
  std::chrono::steady_clock::time_point accepted_at;
  std::vector<char> in;
  std::size_t in_pos = 0;  // start of the first unprocessed byte of `in`
  std::vector<char> out;
  std::size_t out_pos = 0;  // start of the first unsent byte of `out`
  // The parked GET (one key, wants_value) or WAIT.
  bool parked = false;
  bool wants_value = false;
  std::vector<std::string> parked_keys;
  std::size_t next_key = 0;  // keys before it were present when last checked
  std::string waiting_on;    // while parked: the key waiters_ holds it under
};

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

void TcpStoreServer::Impl::HandleFrame(Connection& c, const char* data,
                                       std::size_t size) {
  internal::Request request;
  std::string error;
  if (!internal::DecodeRequest(data, size, &request, &error)) {
    // The client is not speaking this protocol; replying could confuse it
    // further, so it only sees its connection close.
    c.dead = true;
    return;
  }
  if (!c.authenticated) {
    // Unanswered, so that a stranger learns nothing but the closed socket.
    if (request.op != Op::kHello ||
        !internal::TokensEqual(token_, request.token)) {
      c.dead = true;
      return;
    }
    c.authenticated = true;
    if (unauthenticated_ > 0) --unauthenticated_;
    return;
  }
  switch (request.op) {
    case Op::kSet:
      HandleSet(c, std::move(request.key), std::move(request.value));
      break;
    case Op::kGet:
      Park(c, {std::move(request.key)}, /*wants_value=*/true);
      break;
    case Op::kAdd:
      HandleAdd(c, request.key, request.delta);
      break;
    case Op::kCheck: {
      bool all = true;
      for (const std::string& key : request.keys) all &= data_.count(key) > 0;
      Reply(c, OkReplyU8(all));
      break;
    }
    case Op::kWait:
      Park(c, std::move(request.keys), /*wants_value=*/false);
      break;
    case Op::kDelete:
      Reply(c, OkReplyU8(data_.erase(request.key) > 0));
      break;
    case Op::kHello:  // already served, or the server has no token
      break;
  }
}

void TcpStoreServer::Impl::HandleSet(Connection& c, std::string key,
                                     std::vector<char> value) {
  data_[key] = std::move(value);
  Reply(c, OkReply());
  WakeWaiters(key);
}

void TcpStoreServer::Impl::Set(const std::string& key,
                               std::vector<char> value) {
  data_[key] = std::move(value);
  WakeWaiters(key);
  ProcessReady();
}

void TcpStoreServer::Impl::HandleAdd(Connection& c, const std::string& key,
                                     int64_t delta) {
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    const char* begin = it->second.data();
    const char* end = begin + it->second.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || begin == end) {
      Reply(c,
            internal::EncodeErrorReply(fmt::format(
                "cannot add to key '{}': its value is not an integer", key)));
      return;
    }
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    Reply(c, internal::EncodeErrorReply(fmt::format(
                 "cannot add {} to key '{}': int64 overflow", delta, key)));
    return;
  }
  const std::string text = std::to_string(value);
  data_[key] = std::vector<char>(text.begin(), text.end());
  Reply(c, OkReplyI64(value));
  WakeWaiters(key);
}

void TcpStoreServer::Impl::Park(Connection& c, std::vector<std::string> keys,
                                bool wants_value) {
  c.parked = true;
  c.wants_value = wants_value;
  c.parked_keys = std::move(keys);
  c.next_key = 0;
  TryCompleteParked(c);
}

bool TcpStoreServer::Impl::TryCompleteParked(Connection& c) {
  // Resume where the last check stopped; the keys before next_key were
  // present then, and are checked again below only once all others are.
  for (bool rescanned = false;; rescanned = true) {
    for (; c.next_key < c.parked_keys.size(); ++c.next_key) {
      const std::string& key = c.parked_keys[c.next_key];
      if (data_.count(key) == 0) {
        c.waiting_on = key;
        waiters_[key].insert(c.fd);
        return false;
      }
    }
    if (rescanned || c.parked_keys.size() <= 1) break;
    c.next_key = 0;  // a key seen earlier may have been deleted since
  }
  c.parked = false;
  Reply(c, c.wants_value ? OkReplyBytes(data_[c.parked_keys[0]]) : OkReply());
  c.parked_keys.clear();
  return true;
}

void TcpStoreServer::Impl::WakeWaiters(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::set<int> fds = std::move(it->second);
  waiters_.erase(it);
  for (int fd : fds) {
    auto conn = connections_.find(fd);
    if (conn == connections_.end() || conn->second->dead) continue;
    Connection& c = *conn->second;
    if (TryCompleteParked(c)) ready_.push_back(fd);
  }
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
