// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/rendezvous/tcp_store.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store_server.h"
#include "rendezvous/server_thread.h"
#include "rendezvous/wire.h"

namespace disttest {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::ServerThread;

// A blocking socket speaking the wire format by hand.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
  }
  ~RawClient() { ::close(fd_); }

  void Send(const std::vector<char>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // Reads exactly `size` bytes; returns fewer on EOF, reset or 2 s timeout.
  std::vector<char> Read(std::size_t size) {
    std::vector<char> bytes;
    char buf[4096];
    while (bytes.size() < size) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      ssize_t n =
          ::recv(fd_, buf, std::min(sizeof(buf), size - bytes.size()), 0);
      if (n <= 0) break;
      bytes.insert(bytes.end(), buf, buf + n);
    }
    return bytes;
  }

  // True when the server closes the connection within two seconds.
  bool ClosedByServer() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) <= 0;
  }

 private:
  int fd_;
};

std::vector<char> Frame(internal::Op op, std::string key,
                        std::string value = "") {
  internal::Request request;
  request.op = op;
  request.key = std::move(key);
  request.value.assign(value.begin(), value.end());
  return internal::EncodeRequest(request);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  std::string Endpoint() const {
    return "127.0.0.1:" + std::to_string(server_.port());
  }

  ServerThread server_;
  TcpStore a_{"127.0.0.1", server_.port(), milliseconds(5000)};
  TcpStore b_{"127.0.0.1", server_.port(), milliseconds(5000)};
};

TEST_F(TcpStoreTest, SetThenGetReturnsValue) {
  a_.set("k", "v");
  EXPECT_EQ(a_.get_string("k"), "v");
  EXPECT_EQ(b_.get_string("k"), "v");
}

TEST_F(TcpStoreTest, SetOverwritesValue) {
  a_.set("k", "first");
  b_.set("k", "second");
  EXPECT_EQ(a_.get_string("k"), "second");
}

TEST_F(TcpStoreTest, GetBlocksUntilAnotherClientSets) {
  std::atomic<bool> returned{false};
  Clock::time_point returned_at;
  std::string value;
  std::thread getter([&] {
    value = b_.get_string("late");
    returned_at = Clock::now();
    returned = true;
  });
  // The get is parked on the server: it has not returned, and cannot.
  ASSERT_TRUE(server_.WaitForWaiters("late", 1));
  EXPECT_FALSE(returned);
  const Clock::time_point set_at = Clock::now();
  a_.set("late", "here");
  getter.join();
  EXPECT_EQ(value, "here");
  EXPECT_GE(returned_at, set_at);
}

TEST_F(TcpStoreTest, GetTimesOutNamingKeyAndDuration) {
  TcpStore client("127.0.0.1", server_.port(), milliseconds(200));
  const Clock::time_point start = Clock::now();
  std::string message;
  try {
    client.get("missing");
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(message,
            "store get of key 'missing' timed out after 200 ms "
            "(store " +
                Endpoint() + ")");
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(400));
}

TEST_F(TcpStoreTest, ClientWorksAgainAfterTimeout) {
  a_.set_timeout(milliseconds(50));
  EXPECT_THROW(a_.get("k"), TimeoutError);
  // The client closed its connection; the server forgets the parked get.
  EXPECT_TRUE(server_.WaitForConnectionCount(0));
  b_.set("k", "v");
  a_.set_timeout(milliseconds(5000));
  EXPECT_EQ(a_.get_string("k"), "v");
  EXPECT_EQ(server_.ConnectionCount(), 2u);
}

TEST_F(TcpStoreTest, AddFromManyClientsIsExact) {
  constexpr int kThreads = 4;
  constexpr int kAddsPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      TcpStore client("127.0.0.1", server_.port(), milliseconds(5000));
      for (int i = 0; i < kAddsPerThread; ++i) client.add("counter", 1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a_.get_string("counter"), "800");
  EXPECT_EQ(a_.add("counter", -801), -1);
}

TEST_F(TcpStoreTest, AddToTextFailsWithServerMessage) {
  a_.set("text", "abc");
  try {
    a_.add("text", 1);
    ADD_FAILURE() << "add to a non-integer succeeded";
  } catch (const StoreError& e) {
    EXPECT_TRUE(Contains(e.what(), "value is not an integer")) << e.what();
  }
  EXPECT_EQ(a_.get_string("text"), "abc");  // the connection is still fine
}

TEST_F(TcpStoreTest, CheckReportsWhetherAllKeysExist) {
  EXPECT_TRUE(a_.check({}));
  EXPECT_FALSE(a_.check({"x"}));
  b_.set("x", "1");
  EXPECT_TRUE(a_.check({"x"}));
  EXPECT_FALSE(a_.check({"x", "y"}));
}

TEST_F(TcpStoreTest, WaitReturnsOnceAllKeysExist) {
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    b_.wait({"x", "y"});
    returned = true;
  });
  a_.set("x", "1");
  // With x set, the wait is parked on y: it has not returned.
  ASSERT_TRUE(server_.WaitForWaiters("y", 1));
  EXPECT_FALSE(returned);
  a_.add("y", 1);  // add wakes waiters too
  waiter.join();
  EXPECT_TRUE(returned);
  b_.wait({"x", "y"});  // already there: returns at once
}

TEST_F(TcpStoreTest, WaitTimesOutNamingKeys) {
  b_.set("x", "1");
  a_.set_timeout(milliseconds(100));
  try {
    a_.wait({"x", "y"});
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "wait for keys 'x', 'y' timed out after "
                         "100 ms"))
        << e.what();
  }
}

TEST_F(TcpStoreTest, RemoveReportsWhetherKeyExisted) {
  a_.set("k", "v");
  EXPECT_TRUE(b_.remove("k"));
  EXPECT_FALSE(b_.remove("k"));
  EXPECT_FALSE(a_.check({"k"}));
}

TEST_F(TcpStoreTest, LargeValueRoundTrips) {
  std::vector<char> value(8 << 20);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = char(i * 131 + 7);
  a_.set("big", value);
  EXPECT_TRUE(b_.get("big") == value);
}

TEST_F(TcpStoreTest, TooLongKeyIsRejectedBeforeSending) {
  try {
    a_.set(std::string(5000, 'k'), "v");
    ADD_FAILURE() << "a 5000-byte key was accepted";
  } catch (const StoreError& e) {
    EXPECT_TRUE(Contains(e.what(), "key of 5000 bytes exceeds the limit"))
        << e.what();
  }
}

TEST(TcpStoreConnectTest, NoListenerFailsWithinDeadline) {
  // A port that was free a moment ago and has no listener now.
  int port;
  {
    TcpStoreServer server("127.0.0.1", 0);
    port = server.port();
  }
  TcpStore client("127.0.0.1", port, milliseconds(200));
  const Clock::time_point start = Clock::now();
  try {
    client.set("k", "v");
    ADD_FAILURE() << "set without a server succeeded";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot connect to store at 127.0.0.1:" + std::to_string(port) +
                  " within 200 ms: Connection refused");
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(400));
}

TEST_F(TcpStoreTest, BadFrameClosesOnlyThatConnection) {
  const std::vector<std::vector<char>> bad_frames = {
      {'\xff', '\xff', '\xff', '\xff'},       // larger than kMaxFrameBytes
      {'\x01', '\x00', '\x00', '\x00', 'c'},  // unknown op
      {'\x03', '\x00', '\x00', '\x00', '\x01', '\x09', '\x00'},  // truncated
      Frame(internal::Op::kGet, std::string(5000, 'k')),         // key too long
  };
  a_.set("k", "v");
  for (const std::vector<char>& frame : bad_frames) {
    RawClient raw(server_.port());
    raw.Send(frame);
    EXPECT_TRUE(raw.ClosedByServer());
    EXPECT_TRUE(server_.WaitForConnectionCount(1));
    EXPECT_EQ(a_.get_string("k"), "v");
  }
}

TEST_F(TcpStoreTest, FrameSentByteByByteIsReassembled) {
  RawClient raw(server_.port());
  for (char byte : Frame(internal::Op::kSet, "k", "slow")) {
    raw.Send({byte});
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(raw.Read(5), (std::vector<char>{1, 0, 0, 0, 0}));  // ok, no data
  EXPECT_EQ(a_.get_string("k"), "slow");
}

TEST_F(TcpStoreTest, ParkedGetHoldsBackLaterRequestsOfItsConnection) {
  RawClient raw(server_.port());
  std::vector<char> both = Frame(internal::Op::kGet, "p");
  std::vector<char> set = Frame(internal::Op::kSet, "q", "1");
  both.insert(both.end(), set.begin(), set.end());
  raw.Send(both);
  // The GET is parked: the SET behind it has not run.
  ASSERT_TRUE(server_.WaitForWaiters("p", 1));
  EXPECT_FALSE(a_.check({"q"}));
  a_.set("p", "x");
  // GET reply: length 6, ok, bytes "x"; then the SET reply: length 1, ok.
  EXPECT_EQ(raw.Read(15),
            (std::vector<char>{6, 0, 0, 0, 0, 1, 0, 0, 0, 'x', 1, 0, 0, 0, 0}));
  EXPECT_TRUE(a_.check({"q"}));
}

TEST(WireTest, EveryTruncatedRequestIsRejected) {
  internal::Request wait;
  wait.op = internal::Op::kWait;
  wait.keys = {"a", "bc"};
  internal::Request add;
  add.op = internal::Op::kAdd;
  add.key = "n";
  add.delta = -3;
  for (const internal::Request& request : {wait, add}) {
    const std::vector<char> frame = internal::EncodeRequest(request);
    const char* payload = frame.data() + internal::kFrameHeaderBytes;
    const std::size_t size = frame.size() - internal::kFrameHeaderBytes;
    internal::Request out;
    std::string error;
    ASSERT_TRUE(internal::DecodeRequest(payload, size, &out, &error)) << error;
    EXPECT_EQ(out.keys, request.keys);
    EXPECT_EQ(out.delta, request.delta);
    for (std::size_t n = 0; n < size; ++n) {
      EXPECT_FALSE(internal::DecodeRequest(payload, n, &out, &error)) << n;
    }
  }
}

TEST(WireTest, ForgedKeyCountIsRejectedWithoutAllocating) {
  const char payload[] = {5, '\xff', '\xff', '\xff', '\xff'};
  internal::Request out;
  std::string error;
  EXPECT_FALSE(internal::DecodeRequest(payload, sizeof(payload), &out, &error));
  EXPECT_TRUE(out.keys.empty());
  // 4096 keys (the limit) cannot fit in what is left of a 5-byte payload.
  const char short_payload[] = {5, '\x00', '\x10', '\x00', '\x00'};
  EXPECT_FALSE(internal::DecodeRequest(short_payload, sizeof(short_payload),
                                       &out, &error));
  EXPECT_TRUE(out.keys.empty());
}

// A store without a token (a launched run's) on loopback: another user of
// the machine connects and sends one well-formed SET of a rank's verdict.
// It is refused; the key is never set. Root makes the stranger (uid 65534).
TEST(StoreStrangerTest, AnotherUsersClientOnLoopbackIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  ServerThread server;
  const std::vector<char> set =
      Frame(internal::Op::kSet, "launched/0/0/done/1", "0 passed");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Only system calls from here: this process has threads.
    if (syscall(SYS_setgroups, 0, nullptr) != 0 ||
        syscall(SYS_setresgid, 65534, 65534, 65534) != 0 ||
        syscall(SYS_setresuid, 65534, 65534, 65534) != 0) {
      _exit(2);
    }
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      _exit(3);
    }
    (void)!write(fd, set.data(), set.size());
    char reply = 0;
    // The server closes the connection: no reply byte comes.
    _exit(recv(fd, &reply, 1, 0) <= 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the stranger got a reply";
  TcpStore mine("127.0.0.1", server.port(), milliseconds(2000));
  EXPECT_FALSE(mine.check({"launched/0/0/done/1"}));
  // This user's own client is served as ever.
  mine.set("k", "v");
  EXPECT_EQ(mine.get_string("k"), "v");
}

TEST(WireTest, HelloRoundTripsAndLongTokenIsRejected) {
  internal::Request hello;
  hello.op = internal::Op::kHello;
  hello.token = "secret";
  const std::vector<char> frame = internal::EncodeRequest(hello);
  internal::Request out;
  std::string error;
  ASSERT_TRUE(
      internal::DecodeRequest(frame.data() + 4, frame.size() - 4, &out, &error))
      << error;
  EXPECT_EQ(out.op, internal::Op::kHello);
  EXPECT_EQ(out.token, "secret");
  hello.token.assign(internal::kMaxTokenBytes + 1, 't');
  EXPECT_FALSE(internal::ValidateRequest(hello, &error));
  EXPECT_TRUE(Contains(error, "token of 1025 bytes exceeds")) << error;
}

TEST(WireTest, TokensEqualComparesWholeTokens) {
  EXPECT_TRUE(internal::TokensEqual("abc", "abc"));
  EXPECT_FALSE(internal::TokensEqual("abc", "abd"));
  EXPECT_FALSE(internal::TokensEqual("abc", "ab"));
  EXPECT_FALSE(internal::TokensEqual("abc", "abcd"));
  EXPECT_FALSE(internal::TokensEqual("abc", ""));
  EXPECT_FALSE(internal::TokensEqual("ab", std::string("ab\0", 3)));
}

TEST(StoreTokenTest, GeneratedTokensAreHexAndDiffer) {
  const std::string a = GenerateStoreToken();
  const std::string b = GenerateStoreToken();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

class TokenStoreTest : public ::testing::Test {
 protected:
  std::string Endpoint() const {
    return "127.0.0.1:" + std::to_string(server_.port());
  }

  // Runs `request` and returns the StoreError's message ("" when none).
  static std::string Refusal(const std::function<void()>& request) {
    try {
      request();
    } catch (const StoreError& e) {
      return e.what();
    }
    return "";
  }

  const std::string token_ = GenerateStoreToken();
  ServerThread server_{token_};
  TcpStore good_{"127.0.0.1", server_.port(), milliseconds(5000), token_};
};

TEST_F(TokenStoreTest, RightTokenIsServed) {
  good_.set("k", "v");
  TcpStore other("127.0.0.1", server_.port(), milliseconds(5000), token_);
  EXPECT_EQ(other.get_string("k"), "v");
  EXPECT_EQ(other.add("n", 2), 2);
}

TEST_F(TokenStoreTest, WrongTokenIsRefusedAndItsSetNeverLands) {
  TcpStore wrong("127.0.0.1", server_.port(), milliseconds(5000),
                 GenerateStoreToken());
  EXPECT_EQ(Refusal([&] { wrong.set("k", "v"); }),
            "store at " + Endpoint() +
                " closed the connection during set of key 'k' (a wrong store "
                "token closes it at once)");
  EXPECT_FALSE(good_.check({"k"}));
  good_.set("k", "good");
  EXPECT_EQ(good_.get_string("k"), "good");
  // Each request of the refused client opens a new connection and is
  // refused again; nothing it sends is executed.
  EXPECT_FALSE(Refusal([&] { wrong.set("k", "bad"); }).empty());
  EXPECT_EQ(good_.get_string("k"), "good");
}

TEST_F(TokenStoreTest, MissingTokenIsRefused) {
  TcpStore none("127.0.0.1", server_.port(), milliseconds(5000));
  EXPECT_EQ(Refusal([&] { none.add("n", 1); }),
            "store at " + Endpoint() +
                " closed the connection during add to key 'n' (a store that "
                "requires a token closes it at once)");
  EXPECT_FALSE(good_.check({"n"}));
  EXPECT_EQ(good_.add("n", 1), 1);
}

TEST_F(TokenStoreTest, RawFramesBeforeHelloAreNeverExecuted) {
  internal::Request hello;
  hello.op = internal::Op::kHello;
  hello.token = token_;
  hello.token.back() ^= 1;  // one bit off
  std::vector<char> wrong_hello = internal::EncodeRequest(hello);
  const std::vector<char> set = Frame(internal::Op::kSet, "raw", "1");
  wrong_hello.insert(wrong_hello.end(), set.begin(), set.end());
  const std::vector<std::vector<char>> openings = {
      set,                               // no HELLO
      wrong_hello,                       // wrong token, then a SET
      {'\x00', '\x10', '\x00', '\x00'},  // 4 KiB frame: too big for a HELLO
  };
  good_.set("k", "v");  // holds one connection open
  for (const std::vector<char>& bytes : openings) {
    RawClient raw(server_.port());
    raw.Send(bytes);
    EXPECT_TRUE(raw.ClosedByServer());
    EXPECT_TRUE(server_.WaitForConnectionCount(1));
  }
  EXPECT_FALSE(good_.check({"raw"}));
}

// 1,100 idle connections (another user's, found by uid in /proc/net/tcp) ran
// the test process out of descriptors, and the message blamed its ulimit.
// Those that wait to present the token are capped, the oldest going first,
// and closed at a deadline; a rank connecting mid-flood is served at once.
TEST_F(TokenStoreTest, IdleConnectionsWithoutTheTokenAreCappedAndClosed) {
  server_.OnServer<bool>([](TcpStoreServer& s) {
    s.set_hello_deadline(milliseconds(1000));
    return true;
  });
  constexpr std::size_t kFlood = 300;
  std::vector<std::unique_ptr<RawClient>> flood;
  for (std::size_t i = 0; i < kFlood; ++i) {
    flood.push_back(std::make_unique<RawClient>(server_.port()));
  }
  good_.set("k", "v");
  TcpStore mid_flood("127.0.0.1", server_.port(), milliseconds(5000), token_);
  EXPECT_EQ(mid_flood.get_string("k"), "v");
  EXPECT_LE(server_.ConnectionCount(), TcpStoreServer::kMaxUnauthenticated + 2);
  // The first ones went to make room: the server closed them.
  EXPECT_TRUE(flood.front()->ClosedByServer());
  // At the deadline the rest go; the ranks' connections stay.
  for (auto& idle : flood) EXPECT_TRUE(idle->ClosedByServer());
  EXPECT_TRUE(server_.WaitForConnectionCount(2));
  EXPECT_EQ(
      server_.OnServer<std::string>(
          [](TcpStoreServer& s) { return s.flood(); }),
      fmt::format("the store closed {} connections that did not present "
                  "its token within 1000 ms or came beyond the {} that "
                  "may wait at once (the first from uid {}): another "
                  "process floods it",
                  kFlood, TcpStoreServer::kMaxUnauthenticated, geteuid()));
  EXPECT_EQ(mid_flood.get_string("k"), "v");
}

// Ranks that connect at once and present the token late (256 ranks on 2
// cores, run by the scheduler long after their connect) are not a flood:
// beyond the 128 that may wait, new connections wait in the backlog; none
// that has not been idle for a while is closed.
TEST_F(TokenStoreTest, ManyRanksThatPresentTheTokenLateAreNotClosed) {
  constexpr std::size_t kRanks = TcpStoreServer::kMaxUnauthenticated + 40;
  std::vector<std::unique_ptr<RawClient>> ranks;
  for (std::size_t i = 0; i < kRanks; ++i) {
    ranks.push_back(std::make_unique<RawClient>(server_.port()));
  }
  internal::Request hello;
  hello.op = internal::Op::kHello;
  hello.token = token_;
  for (std::size_t i = 0; i < kRanks; ++i) {
    std::vector<char> bytes = internal::EncodeRequest(hello);
    const std::vector<char> set =
        Frame(internal::Op::kSet, "late/" + std::to_string(i), "1");
    bytes.insert(bytes.end(), set.begin(), set.end());
    ranks[i]->Send(bytes);
  }
  for (std::size_t i = 0; i < kRanks; ++i) {
    good_.wait({"late/" + std::to_string(i)});
  }
  EXPECT_EQ(server_.OnServer<std::string>(
                [](TcpStoreServer& s) { return s.flood(); }),
            "");
}

TEST_F(TokenStoreTest, ClientPresentsTokenAgainAfterReconnect) {
  good_.set_timeout(milliseconds(50));
  EXPECT_THROW(good_.get("late"), TimeoutError);  // closes its connection
  EXPECT_TRUE(server_.WaitForConnectionCount(0));
  good_.set_timeout(milliseconds(5000));
  good_.set("late", "v");
  EXPECT_EQ(good_.get_string("late"), "v");
}

TEST_F(TcpStoreTest, HelloToServerWithoutTokenIsIgnored) {
  TcpStore with_token("127.0.0.1", server_.port(), milliseconds(5000),
                      GenerateStoreToken());
  with_token.set("k", "v");
  EXPECT_EQ(a_.get_string("k"), "v");
  EXPECT_EQ(with_token.get_string("k"), "v");
}

}  // namespace
}  // namespace disttest
