// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CommOptions: what every backend's communicator is made with; each
// backend's options extend it (GlooOptions, gloo_communicator.h;
// NcclOptions, nccl_communicator.h).
//
//   disttest::GlooOptions gloo;              // a CommOptions, and a hostname
//   gloo.timeout = std::chrono::seconds(30);
//   auto comm = disttest::GlooCommunicator::Create(store, rank, size, gloo);
#ifndef DISTTEST_COMM_COMM_OPTIONS_H_
#define DISTTEST_COMM_COMM_OPTIONS_H_

#include <chrono>
#include <memory>
#include <string>

namespace disttest {

// Shared memory of the ranks of one host (the harness's; internal).
class HostArena;

struct CommOptions {
  // Key prefix in the store for this communicator's rendezvous.
  std::string prefix;
  // What the harness's reports call it ("world", "tensor group 0"); empty:
  // "communicator <k>", the k-th this process made.
  std::string name;
  // Bounds connecting and every operation.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // The harness's ranks on one host share an arena: before each collective
  // every rank's call is compared there, and on Gloo the small ones carry
  // their data through it. Every rank of the communicator must pass the
  // same arena, or none.
  std::shared_ptr<HostArena> arena;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_COMM_OPTIONS_H_
