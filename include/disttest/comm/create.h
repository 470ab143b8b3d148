// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CreateCommunicator: the backend-neutral way to get a Communicator.
//
//   auto comm = disttest::CreateCommunicator(disttest::Backend::kAuto, store,
//                                            rank, world_size, {});
//
// Collective: every rank calls it with the same store and options.
// Backend::kNccl throws CommError until the NCCL backend lands:
//   "backend nccl is not available: disttest was built without CUDA and NCCL"
// Backend::kAuto means Gloo until then.
#ifndef DISTTEST_COMM_CREATE_H_
#define DISTTEST_COMM_CREATE_H_

#include <memory>

#include "disttest/comm/communicator.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

std::unique_ptr<Communicator> CreateCommunicator(Backend backend, Store& store,
                                                 int rank, int size,
                                                 const GlooOptions& options);

}  // namespace disttest

#endif  // DISTTEST_COMM_CREATE_H_
