// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Store: the key-value interface that ranks rendezvous through.
//
//   disttest::TcpStore store("127.0.0.1", port);          // a client
//   store.set("addr/0", "127.0.0.1:5000");
//   std::string peer = store.get_string("addr/1");        // blocks until set
//   int64_t n = store.add("arrived", 1);                  // atomic counter
//
// Keys are strings, values are bytes. get() and wait() block until the keys
// exist or the timeout passes (TimeoutError). A Store object is not safe for
// concurrent use by several threads unless the implementation says so.
#ifndef DISTTEST_RENDEZVOUS_STORE_H_
#define DISTTEST_RENDEZVOUS_STORE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace disttest {

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout =
      std::chrono::seconds(300);

  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any previous value, and wakes every
  // client blocked on `key`.
  virtual void set(std::string_view key, const std::vector<char>& value) = 0;

  // Returns the value of `key`, waiting until it exists. Throws TimeoutError
  // after timeout(): "store get of key 'k' timed out after N ms (...)".
  virtual std::vector<char> get(std::string_view key) = 0;

  // Adds `delta` to the integer at `key` (created as 0) and returns the new
  // value. The value is stored as decimal text.
  virtual int64_t add(std::string_view key, int64_t delta) = 0;

  // True when every key exists; never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Waits until every key exists, or throws TimeoutError.
  virtual void wait(const std::vector<std::string>& keys) = 0;

  // Removes `key`; returns whether it existed.
  virtual bool remove(std::string_view key) = 0;

  // What this store puts before every key it is given: a PrefixStore's
  // prefixes, outermost first ("test/3/launch/tensor/0/"); "" for a store
  // that keeps keys as given. Communicators made on one store with one
  // CommOptions::prefix rendezvous through the same keys: the harness's
  // reports take them for one communicator. So are groups of one size made
  // with one prefix on two stores of one scope (two stores of your own
  // class that keep this "", say): a test whose ranks use both fails saying
  // so. Return something that tells your stores apart.
  virtual std::string scope() const { return {}; }

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // Conveniences over the byte interface.
  void set(std::string_view key, std::string_view value) {
    set(key, std::vector<char>(value.begin(), value.end()));
  }
  std::string get_string(std::string_view key) {
    std::vector<char> v = get(key);
    return std::string(v.begin(), v.end());
  }

 private:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace disttest

#endif  // DISTTEST_RENDEZVOUS_STORE_H_
