// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/rendezvous/prefix_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "rendezvous/server_thread.h"

namespace disttest {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// An in-memory store that records the timeout in force at every call. Its
// get and wait never block: a missing key is an immediate TimeoutError.
class MapStore : public Store {
 public:
  using Store::set;
  void set(std::string_view key, const std::vector<char>& value) override {
    Record();
    data_[std::string(key)] = value;
  }
  std::vector<char> get(std::string_view key) override {
    Record();
    auto it = data_.find(std::string(key));
    if (it == data_.end()) throw TimeoutError("missing " + std::string(key));
    return it->second;
  }
  int64_t add(std::string_view key, int64_t delta) override {
    Record();
    std::vector<char>& value = data_[std::string(key)];
    int64_t sum =
        (value.empty() ? 0
                       : std::stoll(std::string(value.begin(), value.end()))) +
        delta;
    std::string text = std::to_string(sum);
    value.assign(text.begin(), text.end());
    return sum;
  }
  bool check(const std::vector<std::string>& keys) override {
    Record();
    for (const std::string& key : keys) {
      if (data_.count(key) == 0) return false;
    }
    return true;
  }
  void wait(const std::vector<std::string>& keys) override {
    if (!check(keys)) throw TimeoutError("missing keys");
  }
  bool remove(std::string_view key) override {
    Record();
    return data_.erase(std::string(key)) > 0;
  }

  const std::map<std::string, std::vector<char>>& data() const { return data_; }
  const std::vector<milliseconds>& seen_timeouts() const { return seen_; }

 private:
  void Record() { seen_.push_back(timeout()); }

  std::map<std::string, std::vector<char>> data_;
  std::vector<milliseconds> seen_;
};

TEST(PrefixStoreTest, EveryOperationUsesPrefixedKeys) {
  MapStore base;
  PrefixStore view("test-7", base);
  view.set("x", "1");
  EXPECT_EQ(base.get_string("test-7/x"), "1");
  EXPECT_EQ(view.get_string("x"), "1");
  EXPECT_EQ(view.add("n", 5), 5);
  EXPECT_EQ(base.get_string("test-7/n"), "5");
  EXPECT_TRUE(view.check({"x", "n"}));
  view.wait({"x", "n"});
  EXPECT_TRUE(view.remove("x"));
  EXPECT_FALSE(base.check({"test-7/x"}));
  EXPECT_EQ(base.data().size(), 1u);  // only test-7/n is left
}

TEST(PrefixStoreTest, ViewsWithDifferentPrefixesAreIsolated) {
  MapStore base;
  PrefixStore a("a", base);
  PrefixStore b("b", base);
  a.set("x", "A");
  b.set("x", "B");
  EXPECT_EQ(a.get_string("x"), "A");
  EXPECT_EQ(b.get_string("x"), "B");
  a.set("only-a", "1");
  EXPECT_FALSE(b.check({"only-a"}));
  EXPECT_TRUE(b.remove("x"));
  EXPECT_EQ(a.get_string("x"), "A");
}

TEST(PrefixStoreTest, ViewStartsWithTheBaseTimeout) {
  MapStore base;
  base.set_timeout(milliseconds(1234));
  PrefixStore view("p", base);
  EXPECT_EQ(view.timeout(), milliseconds(1234));
}

TEST(PrefixStoreTest, CallsRunWithTheViewTimeoutAndRestoreTheBase) {
  MapStore base;
  base.set_timeout(milliseconds(5000));
  PrefixStore view("p", base);
  view.set_timeout(milliseconds(100));
  view.set("x", "1");
  view.get("x");
  EXPECT_THROW(view.get("missing"), TimeoutError);
  for (milliseconds seen : base.seen_timeouts()) {
    EXPECT_EQ(seen, milliseconds(100));
  }
  EXPECT_EQ(base.seen_timeouts().size(), 3u);
  EXPECT_EQ(base.timeout(), milliseconds(5000));  // restored, even on throw
}

TEST(PrefixStoreTest, TimeoutOverTcpNamesThePrefixedKey) {
  testing::ServerThread server;
  TcpStore base("127.0.0.1", server.port(), milliseconds(5000));
  PrefixStore view("p", base);
  view.set_timeout(milliseconds(100));
  const Clock::time_point start = Clock::now();
  try {
    view.get("missing");
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'p/missing' timed out after 100 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(Clock::now() - start, milliseconds(300));
  EXPECT_EQ(base.timeout(), milliseconds(5000));
  view.set("k", "v");
  EXPECT_EQ(base.get_string("p/k"), "v");
}

}  // namespace
}  // namespace disttest
