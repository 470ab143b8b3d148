// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// StoreServerThread: a TcpStoreServer served from a thread of its own, for a
// process that hosts the store while its main thread does other work (rank
// 0 of launch() and of a run under an external launcher).
//
//   StoreServerThread server("127.0.0.1", 29500);   // throws when it cannot
//   bind
//   ...                                             // destructor stops it
#ifndef DISTTEST_SRC_RENDEZVOUS_STORE_SERVER_THREAD_H_
#define DISTTEST_SRC_RENDEZVOUS_STORE_SERVER_THREAD_H_

#include <string>
#include <thread>

#include "disttest/rendezvous/tcp_store.h"
#include "disttest/rendezvous/tcp_store_server.h"

namespace disttest::internal {

class StoreServerThread {
 public:
  StoreServerThread(const std::string& host, int port, std::string token = "");
  ~StoreServerThread();
  StoreServerThread(const StoreServerThread&) = delete;
  StoreServerThread& operator=(const StoreServerThread&) = delete;

  int port() const { return server_.port(); }

 private:
  void Loop();

  TcpStoreServer server_;
  int wake_;  // eventfd: the destructor's signal to stop.
  std::thread thread_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_STORE_SERVER_THREAD_H_
