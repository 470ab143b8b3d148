// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TcpStore: the store client. One request is in flight at a time: send a
// frame, then wait for the reply frame. The socket is non-blocking and every
// wait is a poll() against the request's deadline, so a blocking get or wait
// costs no CPU and ends exactly at the deadline, with no sleep loop. With a
// token, every new connection opens with a HELLO frame sent just ahead of
// the request that needed the connection.
#include "disttest/rendezvous/tcp_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "disttest/error.h"
#include "rendezvous/wire.h"

namespace disttest {

using Clock = std::chrono::steady_clock;
using internal::Op;
using internal::Reader;
using internal::Request;
using internal::Status;

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{1};
constexpr milliseconds kMaxBackoff{100};
// Keeps now + timeout from overflowing for "practically infinite" timeouts.
constexpr milliseconds kMaxTimeout = std::chrono::hours(24 * 365 * 100);
// Keys are quoted in messages; a 4 KiB key would drown the message.
constexpr std::size_t kMaxQuotedKey = 200;
constexpr std::size_t kMaxListedKeys = 8;

Clock::time_point DeadlineAfter(milliseconds timeout) {
  return Clock::now() + std::clamp(timeout, milliseconds::zero(), kMaxTimeout);
}

int PollTimeoutMs(Clock::time_point deadline) {
  const Clock::duration left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Rounded up: rounding down would wake early and spin at 0 ms.
  const auto ms = std::chrono::ceil<milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// Waits until `fd` reports `events` (or an error or hangup, which the next
// send or recv reports). Returns false at the deadline.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int timeout_ms = PollTimeoutMs(deadline);
    const int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      throw fmt::system_error(errno, "cannot poll store socket");
    }
    if (n == 0 && timeout_ms == 0) return false;
  }
}

enum class IoResult { kOk, kTimedOut, kClosed, kMalformed, kFailed };

struct IoStatus {
  IoResult result = IoResult::kOk;
  int error = 0;  // errno, for kFailed
};

IoStatus Broken(int error) {
  switch (error) {
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ETIMEDOUT:  // keepalive or retransmission gave up
      return {IoResult::kClosed, error};
    default:
      return {IoResult::kFailed, error};
  }
}

IoStatus SendAll(int fd, const char* data, std::size_t size,
                 Clock::time_point deadline) {
  std::size_t sent = 0;
  while (sent < size) {
    // MSG_NOSIGNAL: a vanished server must be an error, not a SIGPIPE.
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += n;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFor(fd, POLLOUT, deadline)) return {IoResult::kTimedOut};
    } else if (errno != EINTR) {
      return Broken(errno);
    }
  }
  return {};
}

IoStatus ReceiveAll(int fd, char* data, std::size_t size,
                    Clock::time_point deadline) {
  std::size_t received = 0;
  while (received < size) {
    const ssize_t n = ::recv(fd, data + received, size - received, 0);
    if (n > 0) {
      received += n;
    } else if (n == 0) {
      return {IoResult::kClosed};
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFor(fd, POLLIN, deadline)) return {IoResult::kTimedOut};
    } else if (errno != EINTR) {
      return Broken(errno);
    }
  }
  return {};
}

IoStatus ReceiveFrame(int fd, Clock::time_point deadline,
                      std::vector<char>* payload) {
  char header[internal::kFrameHeaderBytes];
  IoStatus status = ReceiveAll(fd, header, sizeof(header), deadline);
  if (status.result != IoResult::kOk) return status;
  const uint32_t length = internal::DecodeFrameLength(header);
  if (length > internal::kMaxFrameBytes) return {IoResult::kMalformed};
  payload->resize(length);
  return ReceiveAll(fd, payload->data(), length, deadline);
}

bool IsRetryable(int error) {
  // The server is not listening yet, its backlog is full, or the name
  // service is briefly unavailable.
  return error == ECONNREFUSED || error == ECONNRESET || error == ETIMEDOUT ||
         error == EAGAIN;
}

// True when the socket is connected to itself: TCP "simultaneous open" lets
// a connect to a free local port succeed when the kernel happens to pick
// that same port as the source port.
bool IsSelfConnected(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

// Connects a new non-blocking socket to `ai`. Returns the fd, or -errno.
int ConnectOne(const addrinfo& ai, Clock::time_point deadline) {
  int fd = ::socket(ai.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai.ai_protocol);
  if (fd < 0) throw fmt::system_error(errno, "cannot create store socket");
  int error = 0;
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    error = errno;
    // After EINTR the connect goes on asynchronously, as for EINPROGRESS.
    if (error == EINPROGRESS || error == EINTR) {
      socklen_t len = sizeof(error);
      if (!WaitFor(fd, POLLOUT, deadline)) {
        error = ETIMEDOUT;
      } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
        error = errno;
      }
    }
  }
  if (error == 0 && IsSelfConnected(fd)) error = ECONNREFUSED;
  if (error != 0) {
    ::close(fd);
    return -error;
  }
  // Requests are small and latency-bound; Nagle would delay them.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

std::string QuoteKey(std::string_view key) {
  if (key.size() <= kMaxQuotedKey) return fmt::format("'{}'", key);
  return fmt::format("'{}...' ({} bytes)", key.substr(0, kMaxQuotedKey),
                     key.size());
}

std::string DescribeKeys(const std::vector<std::string>& keys) {
  std::string text = keys.size() == 1 ? "key " : "keys ";
  for (std::size_t i = 0; i < keys.size() && i < kMaxListedKeys; ++i) {
    if (i > 0) text += ", ";
    text += QuoteKey(keys[i]);
  }
  if (keys.size() > kMaxListedKeys) {
    text += fmt::format(", ... ({} keys)", keys.size());
  }
  return text;
}

std::vector<char> Encode(const Request& request, std::string_view what) {
  std::string error;
  if (!internal::ValidateRequest(request, &error)) {
    throw StoreError(fmt::format("store {} rejected: {}", what, error));
  }
  return internal::EncodeRequest(request);
}

[[noreturn]] void ThrowMalformedReply(std::string_view endpoint,
                                      std::string_view what) {
  throw StoreError(
      fmt::format("store {} sent a malformed reply to {}", endpoint, what));
}

// `closed_hint` is appended when the server closed the connection.
[[noreturn]] void ThrowIoFailure(const IoStatus& io, std::string_view what,
                                 milliseconds timeout,
                                 std::string_view endpoint,
                                 std::string_view closed_hint) {
  switch (io.result) {
    case IoResult::kTimedOut:
      throw TimeoutError(
          fmt::format("store {} timed out after {} ms (store {})", what,
                      timeout.count(), endpoint));
    case IoResult::kClosed:
      throw StoreError(
          fmt::format("store at {} closed the connection during {}{}", endpoint,
                      what, closed_hint));
    case IoResult::kMalformed:
      ThrowMalformedReply(endpoint, what);
    default:
      throw fmt::system_error(io.error, "cannot complete store {} with {}",
                              what, endpoint);
  }
}

// Throws unless `payload` is an ok reply; a server-side error becomes a
// StoreError carrying the server's message.
void CheckStatus(const std::vector<char>& payload, std::string_view what,
                 std::string_view endpoint) {
  Reader reader(payload.data(), payload.size());
  uint8_t status;
  if (!reader.ReadU8(&status)) ThrowMalformedReply(endpoint, what);
  if (status == static_cast<uint8_t>(Status::kOk)) return;
  std::string message;
  if (status != static_cast<uint8_t>(Status::kError) ||
      !reader.ReadString(&message)) {
    ThrowMalformedReply(endpoint, what);
  }
  throw StoreError(fmt::format("store {} failed: {}", what, message));
}

// Why a server closes a connection during its first request: it checks the
// token, or its absence, on the first frame.
std::string_view ClosedHint(bool fresh, bool has_token) {
  if (!fresh) return "";
  return has_token ? " (a wrong store token closes it at once)"
                   : " (a store that requires a token closes it at once)";
}

// Fills `buf` from getrandom(2), or from /dev/urandom on kernels without it.
void ReadRandom(unsigned char* buf, std::size_t size) {
  int fd = -1;  // /dev/urandom, once getrandom is found missing
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = fd < 0 ? ::getrandom(buf + done, size - done, 0)
                             : ::read(fd, buf + done, size - done);
    if (n > 0) done += n;
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && errno == ENOSYS && fd < 0) {
      fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) continue;
    }
    const int error = n == 0 ? EIO : errno;
    if (fd >= 0) ::close(fd);
    throw fmt::system_error(error,
                            "cannot read random bytes for the store token");
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace

std::string GenerateStoreToken() {
  unsigned char bytes[16];
  ReadRandom(bytes, sizeof(bytes));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 0xf];
  }
  return token;
}

// A reply whose status was ok; data() reads what follows the status byte.
struct TcpStore::Reply {
  Reader data() const { return Reader(payload.data() + 1, payload.size() - 1); }

  std::vector<char> payload;
};

TcpStore::TcpStore(std::string host, int port, milliseconds timeout,
                   std::string token)
    : host_(std::move(host)), port_(port) {
  const bool ipv6 = host_.find(':') != std::string::npos;
  endpoint_ = ipv6 ? fmt::format("[{}]:{}", host_, port_)
                   : fmt::format("{}:{}", host_, port_);
  set_timeout(timeout);
  if (!token.empty()) {
    Request hello;
    hello.op = Op::kHello;
    hello.token = std::move(token);
    hello_ = Encode(hello, "token");
  }
}

TcpStore::~TcpStore() { Disconnect(); }

void TcpStore::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpStore::Connect(Clock::time_point deadline) {
  milliseconds backoff = kFirstBackoff;
  for (;;) {
    const int error = TryConnect(deadline);
    if (error == 0) return;
    if (!IsRetryable(error)) {
      throw fmt::system_error(error, "cannot connect to store at {}",
                              endpoint_);
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError(fmt::format(
          "cannot connect to store at {} within {} ms: {}", endpoint_,
          timeout().count(), std::generic_category().message(error)));
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

int TcpStore::TryConnect(Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port_);
  const int rc = getaddrinfo(host_.c_str(), service.c_str(), &hints, &list);
  if (rc == EAI_AGAIN) return EAGAIN;
  if (rc == EAI_SYSTEM) return errno != 0 ? errno : EIO;
  if (rc != 0) {
    throw StoreError(fmt::format("cannot resolve store host '{}': {}", host_,
                                 gai_strerror(rc)));
  }
  // Freed on every path: ConnectOne throws when no socket can be created.
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, freeaddrinfo);
  int error = ECONNREFUSED;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    const int result = ConnectOne(*ai, deadline);
    if (result >= 0) {
      fd_ = result;
      error = 0;
      break;
    }
    error = -result;
  }
  return error;
}

TcpStore::Reply TcpStore::Call(const std::vector<char>& request,
                               std::string_view what) {
  const Clock::time_point deadline = DeadlineAfter(timeout());
  const bool fresh = fd_ < 0;  // then HELLO goes first, if there is a token
  if (fresh) Connect(deadline);
  Reply reply;
  IoStatus io;
  try {
    if (fresh && !hello_.empty()) {
      io = SendAll(fd_, hello_.data(), hello_.size(), deadline);
    }
    if (io.result == IoResult::kOk) {
      io = SendAll(fd_, request.data(), request.size(), deadline);
    }
    if (io.result == IoResult::kOk) {
      io = ReceiveFrame(fd_, deadline, &reply.payload);
    }
  } catch (...) {
    Disconnect();
    throw;
  }
  if (io.result != IoResult::kOk) {
    // A late reply could still arrive; only a new connection is in sync.
    Disconnect();
    ThrowIoFailure(io, what, timeout(), endpoint_,
                   ClosedHint(fresh, !hello_.empty()));
  }
  CheckStatus(reply.payload, what, endpoint_);
  return reply;
}

void TcpStore::set(std::string_view key, const std::vector<char>& value) {
  Request request;
  request.op = Op::kSet;
  request.key = key;
  request.value = value;
  const std::string what = "set of key " + QuoteKey(key);
  Reply reply = Call(Encode(request, what), what);
  if (!reply.data().AtEnd()) ThrowMalformedReply(endpoint_, what);
}

std::vector<char> TcpStore::get(std::string_view key) {
  Request request;
  request.op = Op::kGet;
  request.key = key;
  const std::string what = "get of key " + QuoteKey(key);
  Reply reply = Call(Encode(request, what), what);
  Reader data = reply.data();
  std::vector<char> value;
  if (!data.ReadBytes(&value) || !data.AtEnd()) {
    ThrowMalformedReply(endpoint_, what);
  }
  return value;
}

int64_t TcpStore::add(std::string_view key, int64_t delta) {
  Request request;
  request.op = Op::kAdd;
  request.key = key;
  request.delta = delta;
  const std::string what = "add to key " + QuoteKey(key);
  Reply reply = Call(Encode(request, what), what);
  Reader data = reply.data();
  int64_t value;
  if (!data.ReadI64(&value) || !data.AtEnd()) {
    ThrowMalformedReply(endpoint_, what);
  }
  return value;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Request request;
  request.op = Op::kCheck;
  request.keys = keys;
  const std::string what = "check of " + DescribeKeys(keys);
  Reply reply = Call(Encode(request, what), what);
  Reader data = reply.data();
  uint8_t all_exist;
  if (!data.ReadU8(&all_exist) || !data.AtEnd()) {
    ThrowMalformedReply(endpoint_, what);
  }
  return all_exist != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  Request request;
  request.op = Op::kWait;
  request.keys = keys;
  const std::string what = "wait for " + DescribeKeys(keys);
  Reply reply = Call(Encode(request, what), what);
  if (!reply.data().AtEnd()) ThrowMalformedReply(endpoint_, what);
}

bool TcpStore::remove(std::string_view key) {
  Request request;
  request.op = Op::kDelete;
  request.key = key;
  const std::string what = "remove of key " + QuoteKey(key);
  Reply reply = Call(Encode(request, what), what);
  Reader data = reply.data();
  uint8_t existed;
  if (!data.ReadU8(&existed) || !data.AtEnd()) {
    ThrowMalformedReply(endpoint_, what);
  }
  return existed != 0;
}

}  // namespace disttest
