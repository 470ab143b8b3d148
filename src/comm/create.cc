// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/create.h"

#include <fmt/format.h>

#include "comm/mpi_backend.h"
#include "comm/rank_thread_check.h"
#include "disttest/error.h"

#if DISTTEST_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "disttest/comm/nccl_communicator.h"
#endif

namespace disttest {

namespace internal {
namespace {
MpiCommunicatorFactory mpi_factory = nullptr;
}  // namespace

void SetMpiCommunicatorFactory(MpiCommunicatorFactory factory) {
  mpi_factory = factory;
}

MpiCommunicatorFactory GetMpiCommunicatorFactory() { return mpi_factory; }

std::string MpiBackendMissing() {
  return "backend mpi is not in this program: link it with disttest::mpi "
         "(target_link_libraries(<tests> PRIVATE disttest::mpi); built where "
         "CMake finds MPI, Debian: libopenmpi-dev)";
}
}  // namespace internal

bool NcclBuilt() {
#if DISTTEST_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

int NcclVersion() {
#if DISTTEST_HAVE_NCCL
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
#else
  return 0;
#endif
}

int CudaDeviceCount() {
#if DISTTEST_HAVE_NCCL
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Leaves no error behind for the caller's CUDA.
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

int DeviceOf(const Communicator& comm) {
#if DISTTEST_HAVE_NCCL
  if (auto* nccl = dynamic_cast<const NcclCommunicator*>(&comm)) {
    return nccl->device();
  }
#else
  (void)comm;
#endif
  return -1;
}

std::unique_ptr<Communicator> CreateCommunicator(Backend backend, Store& store,
                                                 int rank, int size,
                                                 const GlooOptions& options,
                                                 int device, CallSite where) {
  internal::RefuseOutsideARankThread(rank, size, "a new communicator");
  switch (backend) {
    case Backend::kAuto:
      if (CudaDeviceCount() < 1) {
        return GlooCommunicator::Create(store, rank, size, options, where);
      }
      [[fallthrough]];
    case Backend::kNccl: {
#if DISTTEST_HAVE_NCCL
      NcclOptions nccl;
      static_cast<CommOptions&>(nccl) = options;  // Timeout and arena.
      nccl.prefix = options.prefix + "/nccl";
      nccl.device = device;
      return NcclCommunicator::Create(store, rank, size, nccl, where);
#else
      (void)device;
      (void)where;
      throw CommError(fmt::format(
          "[rank {}/{}] backend nccl is not available: disttest was built "
          "without CUDA and NCCL",
          rank, size));
#endif
    }
    case Backend::kGloo:
      return GlooCommunicator::Create(store, rank, size, options, where);
    case Backend::kMpi:
      if (internal::MpiCommunicatorFactory make =
              internal::GetMpiCommunicatorFactory()) {
        return make(store, rank, size, options);
      }
      throw CommError(fmt::format("[rank {}/{}] {}", rank, size,
                                  internal::MpiBackendMissing()));
  }
  throw CommError(fmt::format("unknown backend {}", static_cast<int>(backend)));
}

}  // namespace disttest
