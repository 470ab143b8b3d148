// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Backend::kMpi's communicators come from disttest::mpi, a library of its
// own (a program without MPI neither links nor starts it): linked in, it
// hands CreateCommunicator its factory when the program starts.
//
//   internal::SetMpiCommunicatorFactory(&MpiCommunicator::Create);  // mpi
//   if (!internal::MpiBackendLinked()) throw Error(MpiBackendMissing());
#ifndef DISTTEST_SRC_COMM_MPI_BACKEND_H_
#define DISTTEST_SRC_COMM_MPI_BACKEND_H_

#include <memory>
#include <string>

#include "disttest/comm/comm_options.h"
#include "disttest/comm/communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest::internal {

// Makes the communicator of `size` ranks that every member calls with the
// same store and options (their MPI ranks meet under options.prefix).
using MpiCommunicatorFactory = std::unique_ptr<Communicator> (*)(
    Store& store, int rank, int size, const CommOptions& options);

void SetMpiCommunicatorFactory(MpiCommunicatorFactory factory);
MpiCommunicatorFactory GetMpiCommunicatorFactory();
inline bool MpiBackendLinked() {
  return GetMpiCommunicatorFactory() != nullptr;
}
// Why there is none: what to link.
std::string MpiBackendMissing();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_MPI_BACKEND_H_
