// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CreateCommunicator: the backend-neutral way to get a Communicator.
//
//   auto comm = disttest::CreateCommunicator(disttest::Backend::kAuto, store,
//                                            rank, world_size, {});
//   if (disttest::NcclBuilt()) { /* Backend::kNccl can be asked for */ }
//
// Collective: every rank calls it with the same store, backend and options.
// Backend::kNccl builds an NcclCommunicator on `device` (its timeout and
// prefix come from the GlooOptions: prefix + "/nccl") when disttest is built
// with CUDA and NCCL; without them it throws CommError:
//   "[rank 0/2] backend nccl is not available: disttest was built without
//    CUDA and NCCL"
// Backend::kAuto means NCCL when it is built and this process sees a CUDA
// device, else Gloo. The harness resolves kAuto in the parent, for all ranks
// at once; a direct caller must make sure that every rank decides alike.
// Looking for devices initialises CUDA in the calling process: never call
// CreateCommunicator(kAuto), CudaDeviceCount() or a kNccl communicator in a
// process that forks ranks afterwards.
#ifndef DISTTEST_COMM_CREATE_H_
#define DISTTEST_COMM_CREATE_H_

#include <memory>

#include "disttest/comm/communicator.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

std::unique_ptr<Communicator> CreateCommunicator(
    Backend backend, Store& store, int rank, int size,
    const GlooOptions& options, int device = 0,
    CallSite where = CallSite::current());

// Whether disttest was built with CUDA and NCCL (the NCCL backend).
bool NcclBuilt();

// The version of the NCCL linked in, as NCCL numbers it (2.28.9 is 22809;
// ncclGetVersion, which starts no CUDA); 0 without NCCL.
int NcclVersion();

// The CUDA devices this process sees (cudaGetDeviceCount); 0 when NCCL is
// not built or CUDA reports an error (no driver, no device).
int CudaDeviceCount();

// The CUDA device of an NCCL communicator; -1 for any other backend.
int DeviceOf(const Communicator& comm);

}  // namespace disttest

#endif  // DISTTEST_COMM_CREATE_H_
