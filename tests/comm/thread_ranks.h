// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: W ranks of a Gloo communicator as W threads of this process,
// each with its own device and context, meeting through a store served on
// loopback.
//
//   RunRanks(4, [](Communicator& comm) { comm.barrier(); });
#ifndef DISTTEST_TESTS_COMM_THREAD_RANKS_H_
#define DISTTEST_TESTS_COMM_THREAD_RANKS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/host_arena.h"
#include "disttest/comm/create.h"
#include "disttest/rendezvous/tcp_store.h"
#include "rendezvous/server_thread.h"

namespace disttest::testing {

// Runs body(comm) on `world` ranks (threads); rethrows the first failure.
// With `arena`, the ranks share a HostArena (threads share memory as forked
// processes share the arena's mapping).
inline void RunRanks(
    int world, const std::function<void(Communicator&)>& body,
    std::chrono::milliseconds timeout = std::chrono::seconds(30),
    std::shared_ptr<HostArena> arena = nullptr) {
  ServerThread store;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        TcpStore client("127.0.0.1", store.port(), timeout);
        GlooOptions options;
        options.timeout = timeout;
        options.arena = arena;
        auto comm =
            CreateCommunicator(Backend::kGloo, client, r, world, options);
        EXPECT_EQ(comm->rank(), r);
        EXPECT_EQ(comm->size(), world);
        EXPECT_STREQ(comm->backend_name(), "gloo");
        // Every rank has finished connecting before any body runs, so a
        // rank whose body returns at once cannot close its side of the mesh
        // under a peer that is still connecting.
        comm->barrier();
        body(*comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace disttest::testing

#endif  // DISTTEST_TESTS_COMM_THREAD_RANKS_H_
