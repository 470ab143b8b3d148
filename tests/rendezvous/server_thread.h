// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: a TcpStoreServer on 127.0.0.1:0 served from a thread.
//
//   ServerThread server;                       // or server(token)
//   TcpStore client("127.0.0.1", server.port());
#ifndef DISTTEST_TESTS_RENDEZVOUS_SERVER_THREAD_H_
#define DISTTEST_TESTS_RENDEZVOUS_SERVER_THREAD_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "disttest/rendezvous/tcp_store.h"
#include "disttest/rendezvous/tcp_store_server.h"

namespace disttest::testing {

// Runs a TcpStoreServer on 127.0.0.1:0 in its own thread. Inspection goes
// through tasks run on that thread between polls, so tests never race the
// server's data.
class ServerThread {
 public:
  // A non-empty `token` is the server's store token.
  explicit ServerThread(std::string token = "")
      : server_("127.0.0.1", 0, std::move(token)),
        thread_([this] { Loop(); }) {}
  ~ServerThread() {
    stop_ = true;
    thread_.join();
  }

  int port() const { return server_.port(); }

  std::size_t ConnectionCount() {
    std::promise<std::size_t> count;
    std::future<std::size_t> result = count.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back([&] { count.set_value(server_.connection_count()); });
    }
    return result.get();
  }

  // Runs `task` on the server's thread between polls and returns its result.
  template <typename T>
  T OnServer(std::function<T(TcpStoreServer&)> task) {
    std::promise<T> value;
    std::future<T> result = value.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back([&] { value.set_value(task(server_)); });
    }
    return result.get();
  }

  // Clients parked on `key` (a get or wait that cannot complete yet).
  std::size_t WaitingOn(const std::string& key) {
    std::promise<std::size_t> count;
    std::future<std::size_t> result = count.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back([&] { count.set_value(server_.waiting_on(key)); });
    }
    return result.get();
  }

  // Polls WaitingOn(key) until it is `n`; false after ten seconds.
  bool WaitForWaiters(const std::string& key, std::size_t n) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (WaitingOn(key) != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // Polls ConnectionCount() until it is `n`; false after two seconds.
  bool WaitForConnectionCount(std::size_t n) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ConnectionCount() != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

 private:
  void Loop() {
    while (!stop_) {
      server_.PollOnce(10);
      std::vector<std::function<void()>> tasks;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tasks.swap(tasks_);
      }
      for (auto& task : tasks) task();
    }
  }

  TcpStoreServer server_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::function<void()>> tasks_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_RENDEZVOUS_SERVER_THREAD_H_
