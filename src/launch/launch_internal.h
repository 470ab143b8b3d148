// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What launch() and the harness share: building a Context on a store and a
// global communicator that already exist (the harness's ranks have both).
//
//   Context ctx = LaunchOnStore(request, store, &global_comm);
#ifndef DISTTEST_SRC_LAUNCH_LAUNCH_INTERNAL_H_
#define DISTTEST_SRC_LAUNCH_LAUNCH_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "disttest/launch/launch.h"

namespace disttest::internal {

struct LaunchRequest {
  Config config;
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  Backend backend = Backend::kGloo;
  std::uint64_t seed = 1024;
  std::string bind_host = "127.0.0.1";  // Where Gloo's sockets bind.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // What every client of the store presents, and the store asks of each
  // ("": the store takes any client).
  std::string store_token;
  bool log = true;  // Global rank 0 prints the "initialised" line.
  // Kept by the Context until after its communicators are gone.
  std::shared_ptr<void> keep_alive;
};

// Builds every parallel group over `store` (under the key prefix
// "launch/"). `global` is this rank's global communicator, which the
// caller keeps alive as long as the Context; null: the Context creates and
// owns one.
Context LaunchOnStore(const LaunchRequest& request, Store& store,
                      Communicator* global);

// Whether `host` is a loopback name or address.
bool IsLoopback(const std::string& host);
// This machine's hostname ("localhost" when it cannot be read).
std::string Hostname();
// Where a rank's Gloo sockets bind: loopback when the store is on loopback,
// else this machine's hostname.
std::string BindHostFor(const std::string& master_addr);

// The CUDA device of a rank: its local rank (else its global rank) modulo
// the devices visible; -1 without devices.
int SelectDevice(std::optional<int> local_rank, int rank, int device_count);

// The CUDA device of a rank that a launcher started, for `backend`:
// SelectDevice among the devices this process sees; -1 on Gloo (CUDA is not
// asked) or without devices.
int LaunchedDevice(Backend backend, std::optional<int> local_rank, int rank);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_LAUNCH_LAUNCH_INTERNAL_H_
